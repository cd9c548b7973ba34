"""`--export aiperf|inference-perf FILE`: a run in the layout of aiperf's
profile_export_aiperf.json and inference-perf's summary_lifecycle_metrics.json, checked
against samples of those files (tests/fixtures/exports/) and against the run's own figures."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench_support import synthetic_server

from sleuth.tools.bench.export import export
from sleuth.tools.bench.models import BenchRun
from sleuth.tools.bench.result_files import read_records

SAMPLES = Path(__file__).parent / "fixtures" / "exports"
PROFILES = {"m": {"ttft_ms": 30, "itl_ms": 4}}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    tmp = tmp_path_factory.mktemp("export")
    with synthetic_server(PROFILES, realtime=False) as url:
        argv = [sys.executable, "-m", "sleuth.cli", "bench", url, "-m", "m", "-c", "2", "-n"]
        argv += ["8", "--output-len", "10", "--slo", "ttft=1s,tpot=100ms", "--json"]
        argv += ["--export", "aiperf", "profile_export_aiperf.json"]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp, timeout=300)
    assert done.returncode == 0, done.stderr
    yield json.loads(done.stdout), tmp


def same_shape(sample: Any, ours: Any, where: str = "") -> list[str]:
    """Where `ours` lacks a key of `sample` or holds another kind of value."""
    if isinstance(sample, dict):
        if not isinstance(ours, dict):
            return [f"{where}: {type(ours).__name__}, not an object"]
        out = []
        for key, value in sample.items():
            if key not in ours:
                out.append(f"{where}.{key}: missing")
            elif value is not None and ours[key] is not None:
                out += same_shape(value, ours[key], f"{where}.{key}")
        return out
    numeric = (int, float)
    if isinstance(sample, numeric) and not isinstance(sample, bool):
        ok = isinstance(ours, numeric) and not isinstance(ours, bool)
    else:
        ok = type(sample) is type(ours)
    return [] if ok else [f"{where}: {ours!r} where the sample has {sample!r}"]


def test_aiperf_export_has_aiperfs_layout_and_the_runs_figures(
    exported: tuple[dict[str, Any], Path],
) -> None:
    data, tmp = exported
    assert data["exported"] == [str(tmp / "profile_export_aiperf.json")]
    ours = json.loads((tmp / "profile_export_aiperf.json").read_text())
    sample = json.loads((SAMPLES / "profile_export_aiperf.json").read_text())
    sample.pop("aiperf_version")  # we are not aiperf
    assert same_shape(sample, ours) == []
    for key, value in sample.items():
        if isinstance(value, dict) and "unit" in value:
            assert ours[key]["unit"] == value["unit"], key
            assert set(value) <= set(ours[key]), key  # avg, p1..p99, min, max, std
    phase = data["report"]["phases"][0]
    assert ours["time_to_first_token"]["avg"] == pytest.approx(phase["ttft"]["mean"])
    assert ours["inter_token_latency"]["p50"] == pytest.approx(phase["tpot"]["p50"])
    assert ours["request_throughput"]["avg"] == pytest.approx(phase["request_throughput"])
    assert ours["request_count"]["avg"] == 8 and ours["output_sequence_length"]["avg"] == 10
    assert ours["goodput"]["unit"] == "requests/sec" and ours["good_request_count"]["avg"] == 8


def test_inference_perf_export_has_its_layout_in_seconds(
    exported: tuple[dict[str, Any], Path],
) -> None:
    data, tmp = exported
    run = BenchRun.model_validate(data)
    paths = export(run, read_records(run), "inference-perf", tmp / "summary.json")
    ours = json.loads(paths[0].read_text())
    sample = json.loads((SAMPLES / "summary_lifecycle_metrics.json").read_text())
    for part in ("send_duration", "requested_rate", "achieved_rate"):
        sample["load_summary"].pop(part)  # an open loop's; this run is closed
    assert same_shape(sample, ours) == []
    latency = ours["successes"]["latency"]
    for name, dist in sample["successes"]["latency"].items():
        assert list(latency[name]) == list(dist), name  # mean, min, p0.1 .. median .. max
    phase = data["report"]["phases"][0]
    assert latency["time_to_first_token"]["mean"] == pytest.approx(phase["ttft"]["mean"] / 1000)
    assert latency["time_per_output_token"]["median"] == pytest.approx(phase["tpot"]["p50"] / 1000)
    assert ours["successes"]["count"] == 8 and ours["failures"]["count"] == 0
    good = ours["successes"]["goodput_metrics"]
    assert good["goodput_percentage"] == 100.0 and good["ttft_attainment_percentage"] == 100.0


def test_a_sweep_exports_one_file_per_phase_and_a_bad_format_is_refused(
    exported: tuple[dict[str, Any], Path],
) -> None:
    data, tmp = exported
    run = BenchRun.model_validate(data)
    two = run.model_copy(deep=True)
    second = two.report.phases[0].model_copy(update={"phase": 1})
    two.report.phases.append(second)
    paths = export(two, read_records(run), "aiperf", tmp / "sweep.json")
    assert [p.name for p in paths] == ["sweep-phase0.json", "sweep-phase1.json"]
    argv = [sys.executable, "-m", "sleuth.cli", "bench", "http://127.0.0.1:1", "-m", "m"]
    bad = subprocess.run(
        [*argv, "-c", "1", "--export", "genai-perf", "x.json"],
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert bad.returncode == 2 and "give aiperf or inference-perf" in bad.stderr
