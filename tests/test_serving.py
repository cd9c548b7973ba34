"""launch_server, server_status and stop_server against real processes, locally and over sshd.

The "engine" is the synthetic streaming server (tests/streaming_server.py), started through
the custom-command preset, or behind stand-in `python` / `vllm` scripts that record the
argv they were given and then serve it, so the SGLang and vLLM presets run end to end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program.loadgen import METRIC_PREFIXES, metric_totals
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.results import ToolError
from sleuth.tools.serving.engines import LaunchOptions, Speculative, build_argv
from sleuth.tools.serving.status import vllm_metrics
from sleuth.transcripts.results import ToolResult
from tests.server_records import pid_alive, state_of

SERVER = str(Path(__file__).with_name("streaming_server.py"))
READY_LINE = "The server is fired up and ready to roll!"
ALLOW = ["launch_server", "stop_server"]
FAST = {"poll_s": 0.1}

# The names each engine documents, checked by hand against the engine's own source:
# SGLang python/sglang/srt/server_args.py derives each flag from a ServerArgs field
# (model_path, host, port, tp_size, quantization, mem_fraction_static, speculative_algorithm,
# speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens); its
# QUANTIZATION_CHOICES include "modelopt_fp4" and speculative_algorithm's builtins NEXTN.
SGLANG_DOCUMENTED = {
    "--model-path",
    "--host",
    "--port",
    "--tp-size",
    "--quantization",
    "--mem-fraction-static",
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
}
# vLLM vllm/engine/arg_utils.py (EngineArgs.add_cli_args: --tensor-parallel-size,
# --quantization, --gpu-memory-utilization, --speculative-config) and
# vllm/entrypoints/openai/cli_args.py (--host, --port); "mtp" with num_speculative_tokens
# is the MTP form in docs/features/speculative_decoding/mtp.md and the Qwen3.5 recipe.
VLLM_DOCUMENTED = {
    "--host",
    "--port",
    "--tensor-parallel-size",
    "--quantization",
    "--gpu-memory-utilization",
    "--speculative-config",
}

# Start-up lines as the engines print them (see MILESTONES in tools/serving/).
MILESTONE_LINES = {
    "sglang": [
        "[2026-01-01 00:00:01 TP0] Load weight end. type=Qwen3_5MoeForConditionalGeneration, "
        "dtype=torch.bfloat16, avail mem=40.10 GB, mem usage=52.30 GB.",
        "[2026-01-01 00:00:02 TP0] KV Cache is allocated. #tokens: 1200000, K size: 9.00 GB",
        "[2026-01-01 00:00:03 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "[2026-01-01 00:00:09 TP0] Capture cuda graph end. Time elapsed: 6.10 s.",
    ],
    "vllm": [
        "(EngineCore_DP0 pid=1) INFO [gpu_model_runner.py:2000] Model loading took 52.3 GiB "
        "and 80.1 seconds",
        "(EngineCore_DP0 pid=1) INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,200,000 tokens",
        "(EngineCore_DP0 pid=1) INFO [gpu_model_runner.py:3480] Graph capturing finished in 6 "
        "secs, took 0.31 GiB",
    ],
}

STAND_IN = """#!/bin/sh
# Stands in for the engine: records its argv, then serves the synthetic engine on --port.
printf '%s\\n' "$@" > "$(dirname "$0")/argv.txt"
{milestones}
port=
while [ $# -gt 0 ]; do if [ "$1" = --port ]; then port=$2; fi; shift; done
exec {python} {server} --port "$port" --ready-line
"""


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="test")


def deny(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=False, by="test", reason="the test said no")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def live_members(pgid: int) -> list[int]:
    """Processes of the group per pgrep, less zombies (dead, only waiting for init to reap)."""
    listed = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    live = []
    for pid in map(int, listed.split()):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            live.append(pid)
    return live


def group_alive(pgid: int) -> bool:
    return bool(live_members(pgid))


@pytest.fixture(params=["local", "remote"])
def where(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def contexts(
    where: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[..., ToolContext]:
    """Make a context whose host `where` has the given allow list and approver."""

    def make(
        allow: list[str] = ALLOW, approver: Callable[[ApprovalRequest], ApprovalDecision] = approve
    ) -> ToolContext:
        roots = [str(tmp_path)]
        if where == "local":
            host = SandboxedHost(
                "local", LocalHost(), HostConfig(roots=roots, allow=allow), Limits()
            )
            made = ToolContext(hosts={"local": host}, approver=approver)
        else:
            made = request.getfixturevalue("make_context")(roots, allow=allow, approver=approver)
        _FOLDERS.append(state_of(made.host(where)))
        return made

    return make


# The synthetic servers this test asked for, by argv, and the state folders of the hosts it
# used: the sshd login's folder is shared with the tests of this file running at once in other
# pytest workers, so the clean-up must know its own servers rather than guess by time.
_MINE: list[list[str]] = []
_FOLDERS: list[Path] = []


@pytest.fixture(autouse=True)
def no_server_left_behind(tmp_path: Path) -> Iterator[None]:
    """Kill whatever a failing test left running, by the records the tool wrote: only this
    test's servers (its synthetic servers, stand-ins under tmp_path). A bare `sh` script a
    failing test leaves is left to end by itself (none sleeps over 300 s)."""
    _MINE.clear()
    _FOLDERS.clear()
    yield
    for record_file in {f for folder in _FOLDERS for f in folder.glob("srv-*/record.json")}:
        try:
            record = json.loads(record_file.read_text())
            argv = record["argv"]
            if argv in _MINE or str(tmp_path) in " ".join(argv):
                os.killpg(record["pgid"], signal.SIGKILL)
        except (OSError, KeyError, ValueError, IndexError):
            pass


def started_with(ctx: ToolContext, where: str, argv: list[str]) -> list[str]:
    """The servers whose record holds this command. Other workers start servers into the same
    state folder meanwhile, so a refusal is checked by its own command, not by the folder."""
    found = []
    for record_file in state_of(ctx.host(where)).glob("srv-*/record.json"):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record_file.read_text()).get("argv") == argv:
                found.append(record_file.parent.name)
    return found


def synthetic(port: int) -> list[str]:
    argv = [sys.executable, SERVER, "--port", str(port), "--ready-line"]
    _MINE.append(argv)
    return argv


def launch(ctx: ToolContext, where: str, **fields: Any) -> ToolResult:
    return execute(ctx, "launch_server", {"host": where, **FAST, **fields})


def test_custom_command_is_ready_and_status_reports_it(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    port = free_port()
    result = launch(
        ctx,
        where,
        engine="command",
        command=synthetic(port),
        ready_url=f"http://127.0.0.1:{port}/health",
        ready_log_line=READY_LINE,
        timeout_s=30,
    )
    assert result.ok, result.output
    data = result.data
    assert data["ready"] and data["port"] == port
    assert [m["name"] for m in data["milestones"]] == ["ready"]
    assert group_alive(data["pgid"])

    status = execute(ctx, "server_status", {"host": where, "server_id": data["server_id"]})
    assert status.ok, status.output
    assert status.data["alive"] and status.data["ready"]
    assert status.data["models"] == ["synthetic"]
    assert READY_LINE in status.data["tail"]
    assert 0 <= status.data["uptime_s"] < 60

    # The server is detached: it outlives the connection that started it.
    ctx.host(where).host.close()
    time.sleep(0.3)
    assert group_alive(data["pgid"])

    listed = execute(ctx, "server_status", {"host": where})
    assert data["server_id"] in [s["server_id"] for s in listed.data["servers"]]

    stop = execute(ctx, "stop_server", {"host": where, "server_id": data["server_id"]})
    assert stop.ok and stop.data["gone"], stop.output
    assert not group_alive(data["pgid"])


def test_stop_kills_the_whole_group_even_what_ignores_sigterm(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    port = free_port()
    # The server leaves a child in its group, and both ignore SIGTERM.
    argv = ["sh", "-c", 'trap "" TERM; sleep 300 & exec "$0" "$@"', *synthetic(port)]
    result = launch(
        ctx, where, engine="command", command=argv, ready_log_line=READY_LINE, timeout_s=30
    )
    assert result.ok, result.output
    pgid = result.data["pgid"]
    assert len(live_members(pgid)) == 3  # Sleuth's exit-status wrapper, the server, its child

    stop = execute(
        ctx, "stop_server", {"host": where, "server_id": result.data["server_id"], "grace_s": 0.3}
    )
    assert stop.ok, stop.output
    assert stop.data["signals"] == ["SIGTERM", "SIGKILL"]
    assert not group_alive(pgid)
    again = execute(ctx, "stop_server", {"host": where, "server_id": result.data["server_id"]})
    assert again.ok and again.data["was_running"] == []


# A worker that leaves its parent's process group and session, as an engine's worker
# processes may: killing the group alone would leave it running.
SETSID_WORKER = "import os, time; os.setsid(); time.sleep(300)  # sleuth-test-worker"


def test_stop_ends_a_worker_that_left_the_group_and_status_shows_it(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    port = free_port()
    argv = ["sh", "-c", f'"$0" -c "{SETSID_WORKER}" & exec "$0" "$@"', *synthetic(port)]
    result = launch(
        ctx, where, engine="command", command=argv, ready_log_line=READY_LINE, timeout_s=30
    )
    assert result.ok, result.output
    status = execute(ctx, "server_status", {"host": where, "server_id": result.data["server_id"]})
    workers = [
        p
        for p in status.data["processes"]
        if p["cmd"].startswith(sys.executable) and "sleuth-test-worker" in p["cmd"]
    ]
    assert len(workers) == 1, status.data["processes"]
    worker = workers[0]["pid"]
    assert worker not in live_members(result.data["pgid"])  # outside the group
    assert f"pid {worker}" in status.output
    stop = execute(ctx, "stop_server", {"host": where, "server_id": result.data["server_id"]})
    assert stop.ok and stop.data["gone"], stop.output
    assert worker in stop.data["was_running"]
    deadline = time.monotonic() + 5
    while pid_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(worker)
    after = execute(ctx, "server_status", {"host": where, "server_id": result.data["server_id"]})
    assert after.data["processes"] == [] and not after.data["alive"]


@pytest.mark.parametrize("then", ["exit 1", "sleep 300"])
def test_failure_line_ends_the_wait_with_the_log_tail(
    contexts: Callable[..., ToolContext], where: str, then: str
) -> None:
    ctx = contexts()
    script = (
        "echo 'Load weight end. type=Qwen3_5MoeForCausalLM'; sleep 0.2; "
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; " + then
    )
    start = time.monotonic()
    result = launch(
        ctx,
        where,
        engine="command",
        command=["sh", "-c", script],
        ready_log_line=READY_LINE,
        timeout_s=60,
    )
    assert time.monotonic() - start < 20  # well before timeout_s, settle and stop included
    assert not result.ok
    assert result.data["outcome"] == "failed"
    assert "CUDA out of memory. Tried to allocate" in result.data["failure_line"]
    assert "CUDA out of memory" in (result.error or "")
    assert "Load weight end." in result.output.split("log tail:")[1]
    assert not group_alive(result.data["pgid"])


def test_never_ready_times_out_and_the_group_is_killed(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    start = time.monotonic()
    result = launch(
        ctx,
        where,
        engine="command",
        command=["sh", "-c", "echo booting; sleep 300"],
        ready_log_line="never printed",
        timeout_s=1.0,
    )
    assert 1.0 <= time.monotonic() - start < 10
    assert not result.ok and result.data["outcome"] == "timeout"
    assert "timeout" in (result.error or "")
    assert "booting" in result.output
    assert "SIGTERM" in result.data["stopped"]
    assert not group_alive(result.data["pgid"])


def test_exit_before_ready_reports_the_exit_code(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    result = launch(
        contexts(),
        where,
        engine="command",
        command=["sh", "-c", "echo 'bad flag --foo'; exit 3"],
        ready_url="http://127.0.0.1:9/health",
        timeout_s=30,
    )
    assert not result.ok
    assert result.data["outcome"] == "exited" and result.data["exit_code"] == 3
    assert "bad flag --foo" in result.output


def test_env_values_arrive_literally(
    contexts: Callable[..., ToolContext], where: str, tmp_path: Path
) -> None:
    value = f"a b; touch {tmp_path}/CANARY $(touch {tmp_path}/CANARY2) '\""
    result = launch(
        contexts(),
        where,
        engine="command",
        command=["sh", "-c", 'printf "%s\\n" "VAR=$SLEUTH_T_VAR"; exit 0'],
        env={"SLEUTH_T_VAR": value},
        ready_log_line="never",
        timeout_s=30,
    )
    assert result.data["exit_code"] == 0
    assert f"VAR={value}" in result.output
    assert not list(tmp_path.glob("CANARY*"))


def test_bad_env_name_port_in_use_and_bad_id_are_refused(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    bad_env = launch(
        ctx,
        where,
        engine="command",
        command=["true"],
        ready_log_line="x",
        env={"LD_PRELOAD=x; Y": "1"},
    )
    assert not bad_env.ok and "[A-Z_][A-Z0-9_]*" in (bad_env.error or "")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = launch(
            ctx,
            where,
            engine="command",
            command=synthetic(port),
            ready_url=f"http://127.0.0.1:{port}/health",
        )
    assert not taken.ok and "already accepts connections" in (taken.error or "")
    for bad in ("../../etc", "srv-20260101-000000-abcdef/../x"):
        status = execute(ctx, "server_status", {"host": where, "server_id": bad})
        assert not status.ok and "server_id" in (status.error or "")


def test_not_allowed_and_not_approved_launches_are_refused(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    decisions: list[tuple[str, bool]] = []
    request = {"engine": "command", "command": synthetic(free_port()), "ready_log_line": "x"}

    not_allowed = contexts(allow=[])
    not_allowed.on_approval = lambda req, dec: decisions.append((req.tool, dec.approved))
    result = launch(not_allowed, where, **request)
    assert not result.ok and "not allowed" in (result.error or "")
    assert "allow = ['launch_server']" in (result.error or "")
    assert decisions == []

    denied = contexts(approver=deny)
    denied.on_approval = lambda req, dec: decisions.append((req.tool, dec.approved))
    result = launch(denied, where, **request)
    assert not result.ok and "not approved: the test said no" in (result.error or "")
    assert decisions == [("launch_server", False)]
    stop = execute(
        denied, "stop_server", {"host": where, "server_id": "srv-20260101-000000-abcdef"}
    )
    assert not stop.ok and decisions[-1] == ("stop_server", False)
    approved = contexts()
    assert started_with(approved, where, request["command"]) == []

    # The same command approved is found by that check: it looks where a start would write.
    started = launch(approved, where, **{**request, "ready_log_line": READY_LINE})
    assert started.ok, started.output
    assert started_with(approved, where, request["command"]) == [started.data["server_id"]]
    execute(approved, "stop_server", {"host": where, "server_id": started.data["server_id"]})


# --- engine presets ----------------------------------------------------------------------


def qwen35_nvfp4(engine: str, model: str, python: str) -> LaunchOptions:
    return LaunchOptions(
        engine=engine,
        model_path=model,
        port=30000,
        tp=4,
        quantization="modelopt_fp4",
        speculative=Speculative(
            algorithm="NEXTN",
            num_steps=3,
            eagle_topk=1 if engine == "sglang" else None,
            num_draft_tokens=4 if engine == "sglang" else None,
        ),
        mem_fraction=0.85,
        python=python,
    )


MODEL = "/models/Qwen3.5-397B-A17B-NVFP4"


def test_sglang_preset_for_qwen35_nvfp4_with_nextn() -> None:
    argv = build_argv(qwen35_nvfp4("sglang", MODEL, "/venv/bin/python"))
    assert argv == [
        "/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tp-size",
        "4",
        "--quantization",
        "modelopt_fp4",
        "--mem-fraction-static",
        "0.85",
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    assert {a for a in argv if a.startswith("--")} <= SGLANG_DOCUMENTED


def test_vllm_preset_for_qwen35_nvfp4_with_mtp() -> None:
    argv = build_argv(qwen35_nvfp4("vllm", MODEL, "/venv/bin/python"))
    assert argv == [
        "/venv/bin/vllm",
        "serve",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tensor-parallel-size",
        "4",
        "--quantization",
        "modelopt_fp4",
        "--gpu-memory-utilization",
        "0.85",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 3}',
    ]
    assert {a for a in argv if a.startswith("--")} <= VLLM_DOCUMENTED


def test_presets_refuse_what_the_engine_cannot_take() -> None:
    with pytest.raises(ToolError, match="no eagle_topk"):
        build_argv(qwen35_nvfp4("sglang", MODEL, "p").model_copy(update={"engine": "vllm"}))
    eagle = LaunchOptions(
        engine="vllm",
        model_path=MODEL,
        port=8000,
        speculative=Speculative(algorithm="EAGLE3", num_steps=2),
    )
    with pytest.raises(ToolError, match="draft_model_path"):
        build_argv(eagle)
    with pytest.raises(ToolError, match="not a method name"):
        build_argv(
            LaunchOptions(engine="sglang", model_path=MODEL, port=8000, quantization="fp8 --evil")
        )


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_engine_preset_runs_end_to_end(
    contexts: Callable[..., ToolContext], where: str, engine: str, tmp_path: Path
) -> None:
    """The preset's argv reaches the engine unchanged, and its readiness rules hold."""
    model = tmp_path / "Qwen3.5-397B-A17B-NVFP4"
    model.mkdir()
    (model / "config.json").write_text("{}")
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    stand_in = bin_dir / ("python" if engine == "sglang" else "vllm")
    said = MILESTONE_LINES[engine]
    milestones = "\n".join(f"echo '{line}'; sleep 0.15" for line in said)
    stand_in.write_text(
        STAND_IN.format(python=sys.executable, server=SERVER, milestones=milestones)
    )
    stand_in.chmod(0o755)
    if engine == "vllm":
        # Its interpreter answers Sleuth's entry-point check as a full vLLM install would
        # (tests/engine/ checks the real one).
        (bin_dir / "python").write_text(
            '#!/bin/sh\necho \'{"script": true, "dist": true, "module": true}\'\n'
        )
        (bin_dir / "python").chmod(0o755)
    port = free_port()
    ctx = contexts()
    fields: dict[str, Any] = {
        "engine": engine,
        "model_path": str(model),
        "port": port,
        "tp": 4,
        "quantization": "modelopt_fp4",
        "mem_fraction": 0.85,
        "timeout_s": 30,
        "python": str(bin_dir / "python"),
        "speculative": {"algorithm": "NEXTN", "num_steps": 3},
        # The stand-in is no engine and the folder no model: preflight would rightly refuse.
        "preflight": False,
    }
    result = launch(ctx, where, **fields)
    assert result.ok, result.output
    expected = build_argv(
        LaunchOptions(**{k: v for k, v in fields.items() if k not in ("timeout_s", "preflight")})
    )
    assert result.data["argv"] == expected
    assert (bin_dir / "argv.txt").read_text().splitlines() == expected[1:]
    seen = result.data["milestones"]
    expected_names = {
        "sglang": [
            "weights loaded",
            "KV cache allocated",
            "CUDA graph capture begin",
            "CUDA graph capture end",
            "ready",
        ],
        "vllm": ["weights loaded", "KV cache allocated", "CUDA graph capture end"],
    }[engine]
    assert [m["name"] for m in seen] == expected_names
    assert [m["line"] for m in seen][: len(said)] == said
    times = [m["t_s"] for m in seen]
    assert times == sorted(times) and times[0] >= 0 and times[-1] <= result.data["elapsed_s"]

    status = execute(ctx, "server_status", {"host": where, "server_id": result.data["server_id"]})
    assert status.ok and status.data["ready"], status.output
    if engine == "sglang":
        assert "avg_spec_accept_length" in status.data["server_info"]
        assert "CUMULATIVE since launch" in status.output
    else:
        assert any(
            line.startswith("vllm:spec_decode_num_drafts_total")
            for line in status.data["metrics"]["lines"]
        )
    stop = execute(ctx, "stop_server", {"host": where, "server_id": result.data["server_id"]})
    assert stop.ok and not group_alive(result.data["pgid"])


def cmdlines_holding(needle: bytes, stop: threading.Event, found: list[str]) -> None:
    """Every process's command line (what `ps -eo args` shows), scanned until `stop`."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and needle in (entry / "cmdline").read_bytes():
                    found.append((entry / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                continue
        time.sleep(0.02)


def test_a_secret_in_env_reaches_the_server_but_no_command_line_or_output(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    token = "hf_" + "Zq9" * 12
    found: list[str] = []
    stop = threading.Event()
    scanner = threading.Thread(target=cmdlines_holding, args=(token.encode(), stop, found))
    scanner.start()
    try:
        result = launch(
            contexts(),
            where,
            engine="command",
            command=["sh", "-c", 'echo "token=$HF_TOKEN"; sleep 1; echo up; sleep 1; exit 4'],
            env={"HF_TOKEN": token},
            ready_log_line="never printed",
            timeout_s=30,
        )
    finally:
        stop.set()
        scanner.join()
    assert found == []
    assert result.data["exit_code"] == 4  # it ran to its end, with the token in its env
    # The tool hides the launch's env value in the log; the pipeline's redactor runs after it.
    assert "token=[REDACTED:launch-env]" in result.output
    assert token not in result.output and token not in json.dumps(result.data)
    assert "HF_TOKEN" in result.output


def test_an_exited_server_says_when_it_ended_and_its_uptime_stops(
    contexts: Callable[..., ToolContext], where: str
) -> None:
    ctx = contexts()
    result = launch(
        ctx,
        where,
        engine="command",
        command=["sh", "-c", "echo ready-now; sleep 3; exit 0"],
        ready_log_line="ready-now",
        timeout_s=30,
    )
    assert result.ok, result.output
    time.sleep(4.5)
    sid = result.data["server_id"]
    first = execute(ctx, "server_status", {"host": where, "server_id": sid})
    time.sleep(1.0)
    second = execute(ctx, "server_status", {"host": where, "server_id": sid})
    assert not first.data["alive"] and first.data["ended_at"] is not None
    assert 2.5 <= first.data["uptime_s"] <= 4.5
    assert first.data["uptime_s"] == second.data["uptime_s"]
    assert "not running: exited at " in first.output


def test_vllm_module_entry_point_takes_the_model_as_an_option() -> None:
    opts = LaunchOptions(
        engine="vllm", model_path="/m", port=8000, python="/venv/bin/python", vllm_entry="module"
    )
    assert build_argv(opts)[:5] == [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/m",
    ]
    assert build_argv(opts.model_copy(update={"vllm_entry": "script"}))[:3] == [
        "/venv/bin/vllm",
        "serve",
        "/m",
    ]


def test_vllm_metrics_sum_each_counter_over_its_label_sets_as_the_load_generator_does() -> None:
    """server_status and the load generator read /metrics with one parser: a counter's
    samples add up over label sets (one per engine), per-position series stay out."""
    text = (
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        'vllm:spec_decode_num_drafts_total{engine="0"} 100\n'
        'vllm:spec_decode_num_drafts_total{engine="1"} 300\n'
        'vllm:spec_decode_num_draft_tokens_total{engine="0"} 800\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 200\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="1"} 400\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 999\n'
        "vllm:num_requests_running 3\n"
        "process_cpu_seconds_total 12\n"
    )
    metrics = vllm_metrics(text)
    assert metrics.mean_accept_length_since_launch == 2.5  # 1 + 600 accepted / 400 drafts
    assert metrics.acceptance_rate_since_launch == 0.75  # 600 accepted / 800 drafted
    assert [line.split("{")[0].split(" ")[0] for line in metrics.lines] == [
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "vllm:num_requests_running",
    ]
    totals = metric_totals(text, METRIC_PREFIXES)
    assert totals["vllm:spec_decode_num_accepted_tokens_total"] == 600.0
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" not in totals


def test_sleuth_servers_lists_alive_servers_with_the_command_that_stops_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{tmp_path}"]\nallow = ["launch_server", "stop_server"]\n'
    )
    port = free_port()

    def cli(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "sleuth.cli", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    launched = cli(
        "tool",
        "launch_server",
        "engine=command",
        f"command={json.dumps(synthetic(port))}",
        f"ready_url=http://127.0.0.1:{port}/health",
        "poll_s=0.1",
        "--yes",
        "--json",
    )
    sid = launched["data"]["server_id"]
    listed = {s["server_id"]: s for s in cli("servers", "--json")["servers"]}
    assert listed[sid]["alive"] and listed[sid]["port"] == port
    stop = listed[sid]["stop_command"].split()
    assert stop[:4] == ["sleuth", "tool", "stop_server", f"server_id={sid}"]
    assert cli(*stop[1:], "--json")["data"]["gone"]
    after = {s["server_id"]: s for s in cli("servers", "--json")["servers"]}
    assert not after[sid]["alive"] and after[sid]["stopped"]
