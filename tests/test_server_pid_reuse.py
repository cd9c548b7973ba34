"""A server record whose first pid now names another process. Linux gives a pid number out
again only once no process holds it as pid, process group or session, so by then the
server's group and session are gone: stopping that server, or asking its status, must not
take the other process, its group, its session or its children for the server's. Before
the fix, `stop_server` on such a record sent SIGTERM and then SIGKILL to the other process's
whole group (a login shell's, say), and `server_status` called the server alive.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import server_ctl
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from sleuth.tools.serving.ctl import Stopped, ctl
from tests.server_records import Records, local_or_remote, pid_alive, state_of


@pytest.fixture
def stranger() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A process that got the server's pid number: a session and group leader (as a login
    shell is) with a child of its own. Yields it and its child's pid."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        yield proc, child
    finally:
        for pid in (child, proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        proc.wait()


@pytest.fixture(params=["local", "remote"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxedHost:
    return local_or_remote(request, tmp_path)


@pytest.fixture
def records(host: SandboxedHost) -> Iterator[Records]:
    with Records(state_of(host)) as made:
        yield made


def stop_and_status(host: SandboxedHost, sid: str) -> tuple[Stopped, dict[str, object]]:
    stopped = ctl(host, "stop", {"id": sid, "grace_s": 2.0}, Stopped, timeout=60)
    ctx = ToolContext(hosts={host.name: host}, approver=deny_all)
    status = execute(ctx, "server_status", {"host": host.name, "server_id": sid})
    assert status.ok, status.output
    return stopped, status.data


@pytest.mark.parametrize(
    "record",
    [
        "start ticks of an earlier process",  # a record Sleuth writes now
        "no start ticks, started an hour before",  # a record from before start_ticks
    ],
)
def test_a_server_whose_pid_came_back_as_another_process_is_not_alive_and_stop_spares_it(
    host: SandboxedHost,
    records: Records,
    stranger: tuple[subprocess.Popen[bytes], int],
    record: str,
) -> None:
    proc, child = stranger
    ticks = server_ctl.start_ticks(proc.pid)
    assert ticks is not None
    if record.startswith("start ticks"):
        sid = records.write(1, 0, pid=proc.pid, start_ticks=ticks - 500)
    else:
        sid = records.write(1, 0, pid=proc.pid, start_ticks=None, started_at=time.time() - 3600)

    stopped, status = stop_and_status(host, sid)

    assert stopped.was_running == [] and stopped.signals == []
    assert status["alive"] is False and status["processes"] == []
    assert pid_alive(proc.pid) and pid_alive(child)


def test_a_server_whose_pid_is_still_its_own_is_alive_and_stopped_with_its_children(
    host: SandboxedHost, records: Records, stranger: tuple[subprocess.Popen[bytes], int]
) -> None:
    """The control: the same process, recorded with its own start, is the server."""
    proc, child = stranger
    sid = records.write(1, 0, pid=proc.pid)  # its own start ticks

    stopped = ctl(host, "stop", {"id": sid, "grace_s": 2.0}, Stopped, timeout=60)

    assert set(stopped.was_running) == {proc.pid, child} and stopped.signals[0] == "SIGTERM"
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child)
