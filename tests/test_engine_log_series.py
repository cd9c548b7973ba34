"""engine_log_series on real engine log lines (tests/fixtures/live/, URLs in SOURCES.md):
the summary against hand computations from the same lines, and the series as recorded, so a
replay shows it again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from tests.live_servers import FIXTURES


def series(root: Path, name: str, **args: Any) -> tuple[dict[str, Any], str]:
    shutil.copy(FIXTURES / name, root / name)
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(root)]), Limits())
    ctx = ToolContext(hosts={"local": host}, approver=deny_all)
    result = execute(ctx, "engine_log_series", {"host": "local", "path": name, **args})
    assert result.ok, result.output
    return result.data, result.output


def summary(data: dict[str, Any]) -> dict[str, float]:
    return {f["name"]: f["value"] for f in data["summary"]}


def test_mean_accept_length_over_a_window_matches_the_hand_computation(tmp_path: Path) -> None:
    data, output = series(tmp_path, "sglang-decode.log")
    # The three Decode batch lines log accept len 3.05, 2.63 and 2.83.
    assert summary(data)["sglang_decode.accept_length_mean"] == pytest.approx(
        (3.05 + 2.63 + 2.83) / 3
    )
    assert summary(data)["sglang_decode.accept_rate_mean"] == pytest.approx(
        (0.68 + 0.54 + 0.61) / 3
    )
    assert summary(data)["sglang_prefill.cached_tokens_sum"] == 482304
    # The last 4 s before 15:00:21 hold the 15:00:17 and 15:00:21 lines only.
    windowed, _ = series(tmp_path, "sglang-decode.log", last_s=4)
    assert summary(windowed)["sglang_decode.accept_length_mean"] == pytest.approx((2.63 + 2.83) / 2)
    assert summary(windowed)["sglang_decode_lines"] == 2
    assert "sglang_decode.accept_length_mean: 2.837" in output
    assert "[log: accept_length of 'Decode batch' lines] mean of 3 lines" in output


def test_older_and_newer_sglang_line_formats(tmp_path: Path) -> None:
    old, _ = series(tmp_path, "sglang-decode-nospec.log")
    assert summary(old)["sglang_decode.kv_usage_max"] == 0.43
    assert summary(old)["sglang_decode.running_max"] == 509
    assert "sglang_decode.accept_length_mean" not in summary(old)  # no speculation
    new, _ = series(tmp_path, "sglang-prefill-decode.log")
    assert summary(new)["sglang_prefill_lines"] == 3
    assert summary(new)["sglang_prefill.new_tokens_sum"] == 158 + 290 + 160


def test_a_retraction_logged_by_many_ranks_counts_once(tmp_path: Path) -> None:
    data, _ = series(tmp_path, "sglang-retract.log")
    # TP13, TP12 and TP10 logged the 21:49:33 retraction, TP9 the 21:49:45 one.
    assert summary(data)["sglang_retract_lines"] == 2
    assert summary(data)["sglang_retract.retracted_sum"] == 2
    assert [p["rank"] for p in data["points"]] == ["TP13", "TP12", "TP10", "TP9"]


def test_vllm_stats_spec_and_preemption_lines(tmp_path: Path) -> None:
    data, _ = series(tmp_path, "vllm-stats.log")
    got = summary(data)
    assert got["vllm_stats_lines"] == 2
    assert got["vllm_stats.kv_usage_max"] == pytest.approx(0.156)
    assert got["vllm_spec.accept_length_mean"] == 5.44
    assert got["vllm_spec.accept_rate_mean"] == pytest.approx(0.888)
    assert got["vllm_spec.accepted_tokens_sum"] == 262
    preempt, _ = series(tmp_path, "vllm-preempt.log")
    assert summary(preempt)["vllm_preempt.preempted_sum"] == 1
    assert preempt["points"][0]["fields"]["preemptions_total"] == 101


def test_the_series_is_recorded_and_replays(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "sglang-decode.log", tmp_path / "sglang.log")
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("ANTHROPIC_API_KEY", None)

    def sleuth(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sleuth.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    run = sleuth(
        "tool", "engine_log_series", "path=sglang.log", "--json", "--transcripts", "t", "--no-sign"
    )
    assert run.returncode == 0, run.stderr
    shown = json.loads(run.stdout)["data"]
    (transcript,) = (tmp_path / "t").glob("*.jsonl")
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    (recorded,) = [e for e in events if e["type"] == "tool_executed"]
    assert recorded["result"]["data"]["points"] == shown["points"]
    replay = sleuth("replay", str(transcript))
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_vllm_v1_names_the_kv_cache_by_its_device(tmp_path: Path) -> None:
    data, _ = series(tmp_path, "vllm-0.32-cpu-stats.log")
    got = summary(data)
    assert got["vllm_stats_lines"] == 2
    assert got["vllm_stats.kv_usage_max"] == 0.0  # "CPU KV cache usage: 0.0%"
    assert got["vllm_stats.gen_throughput_mean"] == pytest.approx((15.5 + 211.9) / 2)
    assert got["vllm_stats.prefix_cache_hit_rate_mean"] == 0.0
    assert data["points"][0]["time"] == "12-04T19:21:00"
