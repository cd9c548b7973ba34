"""A real vLLM (CPU build) launched, queried, benchmarked and stopped by Sleuth over SSH.

One server serves the module: launch -> ready (start-up stages), status (models, /metrics),
benchmark (tokens from the server's usage), `sleuth servers`, stop (group gone, port free),
status after the stop. The launch carries an HF_TOKEN that must never show on a command line.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.tools.context import ToolContext
from sleuth.transcripts.results import ToolResult
from tests.engine.conftest import RemoteFactory, free_port
from tests.engine.engine_env import EngineEnv
from tests.sshd import SSHServer

OUT_LEN = 16


@dataclass
class Served:
    ctx: ToolContext
    launch: ToolResult
    port: int
    token: str
    env: EngineEnv
    cmdlines_seen: int = 0
    token_on_a_command_line: list[str] = field(default_factory=list)
    server_environ_has_token: bool = False


def _scan_cmdlines(served: Served, stop: threading.Event) -> None:
    """What `ps -eo args` shows, read from /proc as often as it can while the launch runs."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            served.cmdlines_seen += 1
            if served.token.encode() in cmdline:
                served.token_on_a_command_line.append(cmdline.decode(errors="replace"))
        time.sleep(0.05)


@pytest.fixture(scope="module")
def served(engine_env: EngineEnv, remote_context: RemoteFactory) -> Iterator[Served]:
    ctx = remote_context([str(engine_env.root)])
    port = free_port()
    token = "hf_" + secrets.token_hex(17)
    state = Served(ctx, ToolResult(ok=False), port, token, engine_env)
    stop = threading.Event()
    scanner = threading.Thread(target=_scan_cmdlines, args=(state, stop), daemon=True)
    scanner.start()
    try:
        state.launch = execute(
            ctx,
            "launch_server",
            {
                "host": "gpu",
                "engine": "vllm",
                "model_path": str(engine_env.model),
                "port": port,
                "python": str(engine_env.python),
                "env": {**engine_env.server_env(), "HF_TOKEN": token},
                "timeout_s": 900,
                "poll_s": 1.0,
            },
        )
        if state.launch.ok:
            pid = state.launch.data["pid"]
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            state.server_environ_has_token = f"HF_TOKEN={token}".encode() in environ
    finally:
        stop.set()
        scanner.join()
    yield state
    if state.launch.ok:
        execute(ctx, "stop_server", {"host": "gpu", "server_id": state.launch.data["server_id"]})


def test_launch_reaches_ready_with_its_start_up_stages(served: Served) -> None:
    result = served.launch
    assert result.ok, result.output
    data = result.data
    assert data["ready"] and data["outcome"] == "ready"
    # The CPU build's console script cannot find metadata named "vllm"; the module form runs.
    assert data["entry_point"] == "module"
    assert data["argv"][:4] == [
        str(served.env.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
    ]
    assert "entry point: python -m vllm.entrypoints.openai.api_server" in result.output
    stages = {m["name"]: m for m in data["milestones"]}
    assert "Loading weights took" in stages["weights loaded"]["line"]
    assert "CPU KV cache size:" in stages["KV cache allocated"]["line"]
    assert "Application startup complete." in stages["ready"]["line"]
    times = [m["t_s"] for m in data["milestones"]]
    assert times == sorted(times) and times[-1] <= data["elapsed_s"]
    assert (
        stages["weights loaded"]["t_s"]
        <= stages["KV cache allocated"]["t_s"]
        <= stages["ready"]["t_s"]
    )


def test_launch_env_reaches_the_server_but_never_a_command_line(served: Served) -> None:
    assert served.launch.ok, served.launch.output
    assert served.cmdlines_seen > 1000  # the scan really ran through the launch
    assert served.token_on_a_command_line == []
    assert served.server_environ_has_token
    assert served.token not in served.launch.output
    assert served.token not in json.dumps(served.launch.data)
    assert "HF_TOKEN" in served.launch.output  # named, never shown


def test_status_shows_models_and_metrics(served: Served) -> None:
    assert served.launch.ok, served.launch.output
    sid = served.launch.data["server_id"]
    status = execute(served.ctx, "server_status", {"host": "gpu", "server_id": sid})
    assert status.ok, status.output
    assert status.data["alive"] and status.data["ready"]
    assert status.data["models"] == [str(served.env.model)]
    names = {line.split("{")[0].split(" ")[0] for line in status.data["metrics"]["lines"]}
    assert {"vllm:num_requests_running", "vllm:kv_cache_usage_perc"} <= names
    assert "alive, ready; up" in status.output


def test_benchmark_counts_tokens_from_usage_and_adds_up(served: Served) -> None:
    assert served.launch.ok, served.launch.output
    bench = execute(
        served.ctx,
        "run_benchmark",
        {
            "host": "gpu",
            "endpoint": f"http://127.0.0.1:{served.port}",
            "model": str(served.env.model),
            "api": "completions",
            "concurrency": [2],
            "num_prompts": 8,
            "input_len": 32,
            "output_len": OUT_LEN,
            "warmup": 1,
            "python": str(served.env.python),
            "timeout_s": 600,
        },
    )
    assert bench.ok, bench.output
    phase = bench.data["report"]["phases"][0]
    assert phase["completed"] == 8 and phase["failed"] == 0
    # Tokens are the server's own count (usage), and ignore_eos gave exactly OUT_LEN each.
    assert not phase["tokens_estimated"]
    assert phase["output_len_mismatch_share"] == 0
    records = [json.loads(line) for line in Path(bench.data["jsonl"]).read_text().splitlines()]
    usage = [r["usage"] for r in records if r.get("usage") and not r.get("warmup")]
    assert len(usage) == 8 and all(u["completion_tokens"] == OUT_LEN for u in usage)
    e2e, ttft, tpot = phase["e2e"]["mean"], phase["ttft"]["mean"], phase["tpot"]["mean"]
    assert e2e == pytest.approx(ttft + (OUT_LEN - 1) * tpot, rel=0.05)


def test_sleuth_servers_lists_the_running_server(served: Served, sshd: SSHServer) -> None:
    assert served.launch.ok, served.launch.output
    listing = execute(served.ctx, "server_status", {"host": "gpu"})
    mine = [s for s in listing.data["servers"] if s["server_id"] == served.launch.data["server_id"]]
    assert mine and mine[0]["alive"]
    assert mine[0]["stop_command"].startswith("sleuth tool stop_server server_id=srv-")


def test_stop_frees_the_port_and_status_reports_the_stop(served: Served) -> None:
    assert served.launch.ok, served.launch.output
    sid, pgid = served.launch.data["server_id"], served.launch.data["pgid"]
    stop = execute(served.ctx, "stop_server", {"host": "gpu", "server_id": sid})
    assert stop.ok and stop.data["gone"], stop.output
    assert not _group_alive(pgid)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", served.port)) != 0
        # Free to take again, as a server takes it (SO_REUSEADDR: the benchmark's closed
        # connections may sit in TIME_WAIT).
        with socket.socket() as again:
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", served.port))
            again.listen()
    first = execute(served.ctx, "server_status", {"host": "gpu", "server_id": sid})
    time.sleep(1.5)
    second = execute(served.ctx, "server_status", {"host": "gpu", "server_id": sid})
    assert not first.data["alive"] and first.data["stopped"]
    assert first.data["stopped_at"] is not None
    assert "stopped by stop_server at " in first.output
    assert first.data["uptime_s"] == second.data["uptime_s"]  # the clock stopped with it


def _group_alive(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
