"""Faults: each ends with a clear error or a recovery, never a hang or a corrupt transcript.

- the model API answering 529, 500, garbage JSON, or stalling;
- sshd stopped mid-investigation, then started again;
- a connection that hangs (the server frozen with SIGSTOP, so packets go unanswered);
- the disk filling while the transcript is written (a 64 KiB tmpfs).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.calls import execute
from sleuth.agent.loop import RunResult
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Limits, Settings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ErrorEvent, SessionEnded, ToolExecuted
from sleuth.transcripts.store import TranscriptError, load
from sleuth.transcripts.verify import verify
from tests.scripted_api import GARBAGE, ScriptedAPI, message, stall, status, text, tool_use
from tests.sshd import SSHServer, _descendants

from . import figures

HANG_LIMIT_S = 90.0


def bounded(fn: Callable[[], Any], limit: float = HANG_LIMIT_S) -> Any:
    """Run `fn` in a thread; a call still running after `limit` seconds is a hang."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    hung = thread.is_alive()
    figures.count("faults_hangs_or_corrupt", int(hung))
    assert not hung, f"still running after {limit:g} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def local_ctx(root: Path) -> ToolContext:
    config = HostConfig(roots=[str(root)])
    return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})


def investigate(api: ScriptedAPI, ctx: ToolContext, transcripts: Path, **brain: Any) -> RunResult:
    b = AnthropicBrain(
        "claude-haiku-4-5", api_key="sk-ant-test-0123456789abcdefghij", base_url=api.url, **brain
    )
    inv = start_investigation("What is here?", b, ctx, Settings(), transcripts)
    result: RunResult = inv.run()
    return result


def sound(path: Path) -> bool:
    ok = verify(path).ok
    figures.count("faults_hangs_or_corrupt", int(not ok))
    return ok


@pytest.mark.parametrize(
    "fault",
    [status(529), status(500), GARBAGE, stall(3.0)],
    ids=["529", "500", "garbage", "stall"],
)
def test_model_api_faults_end_with_a_clear_error(tmp_path: Path, fault: Any) -> None:
    with ScriptedAPI(lambda body, i: fault) as api:
        result = bounded(
            lambda: investigate(api, local_ctx(tmp_path), tmp_path / "t", attempts=2, timeout_s=1.0)
        )
    assert result.status == "error"
    assert "Messages API" in result.answer or "Anthropic" in result.answer, result.answer
    events = load(Path(result.transcript)).events
    assert any(isinstance(e, ErrorEvent) and e.where == "brain" for e in events)
    assert isinstance(events[-1], SessionEnded)
    assert sound(Path(result.transcript))


def test_model_api_recovers_after_transient_faults(tmp_path: Path) -> None:
    script = [status(529, retry_after="0"), status(500), message(text("all fine"))]
    with ScriptedAPI(script) as api:
        result = bounded(
            lambda: investigate(api, local_ctx(tmp_path), tmp_path / "t", attempts=3, timeout_s=5.0)
        )
    # No finding was reported, so the run is unsupported; the text still comes through.
    assert result.status == "unsupported" and result.answer == "all fine"
    assert sound(Path(result.transcript))


def _remote_ctx(
    sshd: SSHServer, root: Path, tmp_path: Path, calls: Any
) -> tuple[ToolContext, SSHHost]:
    ssh = SSHHost(
        "remote",
        sshd.alias,
        known_hosts=tmp_path / "kh",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
        connect_timeout=3,
        calls=calls,
    )
    config = HostConfig(roots=[str(root)])
    limits = Limits(timeout_s=3)
    return ToolContext(
        hosts={"remote": SandboxedHost("remote", ssh, config, limits)}, limits=limits
    ), ssh


@pytest.mark.ssh
def test_sshd_killed_and_restarted_mid_investigation(
    sshd: SSHServer, tmp_path: Path, ssh_calls: str
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    ctx, ssh = _remote_ctx(sshd, tmp_path, tmp_path, ssh_calls)

    def script(body: Any, index: int) -> Any:
        if index == 1:
            sshd.stop()  # down while the model thinks
        if index == 2:
            sshd.start()
        if index < 3:
            return message(tool_use(f"toolu_{index}", "read_lines", host="remote", path="a.txt"))
        return message(text("done"))

    try:
        with ScriptedAPI(script) as api:
            result = bounded(lambda: investigate(api, ctx, tmp_path / "t"))
    finally:
        if sshd.process is None:
            sshd.start()
        ssh.close()
    calls = [e for e in load(Path(result.transcript)).events if isinstance(e, ToolExecuted)]
    assert result.status == "unsupported"  # it reported no finding
    assert [c.result.ok for c in calls] == [True, False, True]
    assert "refused" in calls[1].result.output or "connect" in calls[1].result.output, calls[
        1
    ].result.output
    assert "hello" in calls[2].result.output and ssh.conn.reconnects >= 1
    assert sound(Path(result.transcript))


@pytest.mark.ssh
def test_a_hanging_connection_ends_when_the_timeouts_fire(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, ssh_calls: str
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with SSHServer.create(tmp_path_factory.mktemp("frozen-sshd")) as server:
        ctx, ssh = _remote_ctx(server, tmp_path, tmp_path, ssh_calls)
        assert execute(ctx, "read_lines", {"host": "remote", "path": "a.txt"}).ok
        assert server.process is not None
        frozen = [server.process.pid, *_descendants(server.process.pid)]
        for pid in frozen:  # every packet now goes unanswered
            os.kill(pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            results = [
                bounded(lambda: execute(ctx, "read_lines", {"host": "remote", "path": "a.txt"})),
                bounded(
                    lambda: execute(ctx, "grep", {"host": "remote", "path": ".", "pattern": "x"})
                ),
            ]
            elapsed = time.monotonic() - start
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            ssh.close()
    for result in results:
        assert not result.ok and "internal error" not in (result.error or "")
        assert "stopped answering" in (result.error or "") or "timed out" in (result.error or "")
    assert elapsed < 60, f"{elapsed:.0f} s: the io and connect timeouts (20 s, 10 s) did not fire"


def _tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); needs root")


def test_disk_full_while_writing_the_transcript(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.txt").write_text("".join(f"line {i} " + "y" * 60 + "\n" for i in range(600)))
    disk = tmp_path / "disk"
    _tmpfs(disk, "64k")
    try:
        script = [
            message(tool_use(f"toolu_{i}", "read_lines", path="big.txt", start=1, end=600))
            for i in range(8)
        ] + [message(text("done"))]
        with ScriptedAPI(script) as api, pytest.raises(TranscriptError) as caught:
            bounded(lambda: investigate(api, local_ctx(root), disk / "t"))
        assert "No space left" in str(caught.value) or "space" in str(caught.value)
        (path,) = (disk / "t").glob("*.jsonl")
        report = verify(path)
        events = load(path).events
        assert len(events) >= 2  # the prefix before the disk filled is whole
        assert sound(path) or [p.message for p in report.problems] == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)
