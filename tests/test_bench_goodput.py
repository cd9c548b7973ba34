"""Goodput under SLOs: `--slo` parsing, the bounded bisection over rates (its bracket and its
three ways of stopping), and `--find-max-rate` against a synthetic server of known capacity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from bench_support import synthetic_server

from sleuth.errors import ToolError
from sleuth.tools.bench.goodput import parse_slo, search
from sleuth.tools.bench.models import PhaseMetrics, Slo


def test_slo_text_takes_units_and_refuses_what_it_cannot_read() -> None:
    assert parse_slo("ttft=500ms,tpot=50ms,e2e=2s") == Slo(ttft_ms=500, tpot_ms=50, e2e_ms=2000)
    assert parse_slo(" TTFT = 0.25s ") == Slo(ttft_ms=250)
    assert parse_slo("tpot=1500us,e2e=90") == Slo(tpot_ms=1.5, e2e_ms=90)
    for bad in ("itl=5ms", "ttft=fast", "ttft=5ms;tpot=1ms", ""):
        with pytest.raises(ToolError, match="NAME=LIMIT"):
            parse_slo(bad)


def capacity(limit: float) -> object:
    """A probe of a server that keeps every SLO up to `limit` requests/s and half beyond."""
    tried: list[float] = []

    def probe(rate: float) -> tuple[PhaseMetrics, str]:
        tried.append(rate)
        share = 1.0 if rate <= limit else 0.5
        phase = PhaseMetrics.model_construct(
            goodput_share=share, goodput=rate * share, request_throughput=rate, requests=100
        )
        return phase, f"run-{len(tried)}.jsonl"

    return probe


def test_bisection_brackets_the_highest_rate_that_meets_the_target() -> None:
    found = search(capacity(11.0), slo=Slo(e2e_ms=100), low=1, high=64, max_steps=12)  # type: ignore[arg-type]
    assert found.max_rate is not None and found.max_rate <= 11.0
    lo, hi = found.bracket
    assert hi is not None and lo <= 11.0 < hi and (hi - lo) / hi <= 0.05
    assert found.stopped == "bracket within 5%"
    assert [p.meets for p in found.probes[:2]] == [True, False]
    assert all(p.meets == (p.rate <= 11.0) for p in found.probes)


def test_the_search_stops_at_its_step_and_time_limits_and_says_which() -> None:
    few = search(capacity(11.0), slo=Slo(e2e_ms=100), low=1, high=64, max_steps=4)  # type: ignore[arg-type]
    assert len(few.probes) == 4 and few.stopped == "4 probes made (max_steps)"
    assert few.bracket[0] == few.max_rate
    hurried = search(capacity(11.0), slo=Slo(e2e_ms=100), low=1, high=64, budget_s=0.0)  # type: ignore[arg-type]
    assert len(hurried.probes) == 2 and "time budget" in hurried.stopped
    never = search(capacity(0.5), slo=Slo(e2e_ms=100), low=1, high=64)  # type: ignore[arg-type]
    assert never.max_rate is None and never.bracket == (0.0, 1.0) and len(never.probes) == 1
    always = search(capacity(1000), slo=Slo(e2e_ms=100), low=1, high=64)  # type: ignore[arg-type]
    assert always.max_rate == 64 and always.bracket == (64, None)


def test_find_max_rate_on_a_server_that_serves_one_request_at_a_time(tmp_path: Path) -> None:
    # 10 ms to the first token, then 9 more 2 ms apart: ~28 ms each, one at a time, so about
    # 35 requests/s at most; an E2E limit of 120 ms fails once requests queue for long.
    profile = {"q": {"ttft_ms": 10, "itl_ms": 2, "serialise": True}}
    with synthetic_server(profile, realtime=False) as url:
        argv = [sys.executable, "-m", "sleuth.cli", "bench", url, "-m", "q", "--output-len", "10"]
        argv += ["--slo", "e2e=120ms", "--find-max-rate", "4,80", "--duration", "1"]
        argv += ["--search-steps", "4", "--warmup", "1", "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        schema = subprocess.run(
            [sys.executable, "-m", "sleuth.cli", "schema", "bench-goodput"],
            capture_output=True,
            text=True,
        )
    data = json.loads(done.stdout)
    jsonschema.validate(data, json.loads(schema.stdout))
    rates = [p["rate"] for p in data["probes"]]
    assert rates[:3] == [4, 80, 42] and len(rates) == 4
    lo, hi = data["bracket"]
    assert data["max_rate"] == lo and 4 <= lo < hi <= 80
    assert all(p["meets"] == (p["rate"] <= lo) for p in data["probes"])
    assert 10 < lo < 60  # the server's capacity, with room for a loaded machine
    assert data["probes"][0]["share"] >= 0.9 and data["probes"][1]["share"] < 0.9
    assert Path(data["plot"]).read_bytes()[:4] == b"\x89PNG"
