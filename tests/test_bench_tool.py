"""run_benchmark through the tool registry: on the local host, and over the test sshd
with the load generator on the host (where=remote) and here through a port forward."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bench_support import synthetic_server

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext

PROFILES = {"fast": {"ttft_ms": 30, "itl_ms": 5, "tokens_per_chunk": 2}}


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="test")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with synthetic_server(PROFILES, realtime=False) as url:
        yield url


def call(ctx: ToolContext, host: str, url: str, tmp: Path, **extra: Any) -> Any:
    ctx.results_dir = tmp / "results"
    raw = {
        "host": host,
        "endpoint": url,
        "model": "fast",
        "concurrency": [1, 3],
        "num_prompts": 6,
        "input_len": 32,
        "output_len": 20,
        "warmup": 1,
        "python": sys.executable,
        **extra,
    }
    return execute(ctx, "run_benchmark", raw)


def check_run(result: Any, where: str) -> dict[str, Any]:
    assert result.ok, result.error
    data = result.data
    assert data["where"] == where
    phases = data["report"]["phases"]
    assert [p["concurrency_target"] for p in phases] == [1, 3]
    for phase in phases:
        assert phase["completed"] == 6 and phase["failed"] == 0
        assert abs(phase["ttft"]["p50"] - 30) < 15
        assert abs(phase["itl_token"]["p50"] - 2.5) < 2
        assert phase["spec"]["accept_length"] == pytest.approx(2.0)
    lines = Path(data["jsonl"]).read_text().splitlines()
    assert sum('"type":"request"' in line for line in lines) == 13  # 1 warmup + 2 x 6
    assert "c=3" in result.output
    return dict(data)


def test_run_benchmark_on_the_local_host(server: str, tmp_path: Path) -> None:
    config = HostConfig(roots=[str(tmp_path)], allow=["run_benchmark"])
    local = SandboxedHost("local", LocalHost("local"), config, Limits())
    ctx = ToolContext(hosts={"local": local}, approver=approve)
    check_run(call(ctx, "local", server, tmp_path), "remote")
    data = check_run(call(ctx, "local", server, tmp_path, where="local"), "local")
    assert data["round_trip_ms"] is None  # nothing to forward on this machine


def test_run_benchmark_needs_permission_and_a_loopback_endpoint(
    server: str, tmp_path: Path
) -> None:
    config = HostConfig(roots=[str(tmp_path)], allow=[])
    local = SandboxedHost("local", LocalHost("local"), config, Limits())
    refused = call(ToolContext(hosts={"local": local}, approver=approve), "local", server, tmp_path)
    assert not refused.ok and "allow = ['run_benchmark']" in (refused.error or "")
    config.allow.append("run_benchmark")
    ctx = ToolContext(hosts={"local": local}, approver=approve)
    elsewhere = call(ctx, "local", "http://10.0.0.5:8000", tmp_path)
    assert not elsewhere.ok and "http://127.0.0.1:PORT" in (elsewhere.error or "")
    no_aiohttp = call(ctx, "local", server, tmp_path, python="/bin/false")
    assert not no_aiohttp.ok and "load generator failed" in (no_aiohttp.error or "")
    chosen_dir = call(ctx, "local", server, tmp_path, results_dir=str(tmp_path / "elsewhere"))
    assert not chosen_dir.ok and "results_dir" in (chosen_dir.error or "")
    assert not (tmp_path / "elsewhere").exists()  # where records go is never the model's choice
    huge = call(ctx, "local", server, tmp_path, input_len=2**63)  # found by fuzzing: 16 GB RSS
    assert not huge.ok and "input_len" in (huge.error or "")
    heavy = call(ctx, "local", server, tmp_path, input_len=100_000, concurrency=[1000])
    assert not heavy.ok and "prompt words" in (heavy.error or "")
    # A ramp from 0 req/s put the second arrival 10^9 s away: the run waited out its timeout.
    ramp = {"concurrency": None, "request_rate": None, "ramp_up": [0, 10]}
    from_zero = call(ctx, "local", server, tmp_path, **ramp)
    assert not from_zero.ok and "ramp_up" in (from_zero.error or "")
    negative_slo = call(ctx, "local", server, tmp_path, slo_ttft_ms=-5)
    assert not negative_slo.ok and "slo_ttft_ms" in (negative_slo.error or "")


@pytest.mark.ssh
def test_run_benchmark_over_ssh_both_placements(
    server: str, tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    ctx = make_context([str(tmp_path)], allow=["run_benchmark"], approver=approve)
    check_run(call(ctx, "remote", server, tmp_path), "remote")
    data = check_run(call(ctx, "remote", server, tmp_path, where="local"), "local")
    rtt = data["round_trip_ms"]
    assert rtt["n"] == 5 and 0 < rtt["p50"] < 500
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        nothing = f"http://127.0.0.1:{sock.getsockname()[1]}"
    missing = call(ctx, "remote", nothing, tmp_path, where="local")
    assert not missing.ok and "nothing answered" in (missing.error or "")


def test_sleuth_bench_sweep_prints_json_and_draws_the_plot(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from sleuth.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "bench",
            server,
            "-m",
            "fast",
            "-c",
            "1,2",
            "-n",
            "2",
            "--output-len",
            "6",
            "--input-len",
            "8",
            "--warmup",
            "0",
            "--python",
            sys.executable,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [p["concurrency_target"] for p in data["report"]["phases"]] == [1, 2]
    assert Path(data["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Beside the percentiles: latency CDFs per phase, and throughput against concurrency.
    names = [Path(p).name.removeprefix(Path(data["jsonl"]).stem) for p in data["plots"]]
    assert names == [".png", "-cdf.png", "-rates.png"]
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in data["plots"])
    assert Path(data["jsonl"]).parent == tmp_path / "bench-results"
    bad = CliRunner().invoke(app, ["bench", server, "-m", "fast", "-c", "1", "-r", "3"])
    assert bad.exit_code == 2 and "exactly one of" in bad.output


@pytest.mark.ssh
def test_api_key_reaches_the_remote_load_generator_on_stdin_never_in_ps(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    import subprocess
    import threading

    from sleuth.tools.bench.bench_input import RunBenchmarkInput
    from sleuth.tools.bench.run_benchmark import benchmark

    key = "sk-remote-9c1e77b0f3a2d4"
    ctx = make_context([str(tmp_path)], allow=["run_benchmark"], approver=approve)
    ctx.results_dir = tmp_path / "results"
    seen: list[str] = []
    done = threading.Event()

    def watch_ps() -> None:
        while not done.is_set():
            ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True)
            # The test server itself is given the key on its command line; nothing else may be.
            seen.append("\n".join(x for x in ps.stdout.splitlines() if "streaming_server" not in x))
            done.wait(0.02)

    slow = {"fast": {"ttft_ms": 100, "itl_ms": 20}}
    with synthetic_server(slow, "--api-key", key, realtime=False) as url:
        args = RunBenchmarkInput(
            host="remote",
            endpoint=url,
            model="fast",
            concurrency=[2],
            num_prompts=4,
            output_len=20,
            input_len=8,
            python=sys.executable,
        )
        watcher = threading.Thread(target=watch_ps)
        watcher.start()
        try:
            result = benchmark(ctx, args, {"Authorization": f"Bearer {key}"})
        finally:
            done.set()
            watcher.join()
    assert result.ok, result.error
    assert result.data["report"]["phases"][0]["completed"] == 4
    assert any("SECRETS" in snapshot for snapshot in seen)  # the watcher saw the run itself
    assert not any(key in snapshot for snapshot in seen)
    assert key not in " ".join(result.argv[0]) + result.output
