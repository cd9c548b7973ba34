"""Server records a test writes into server_ctl's real state folder, removed after it.

That folder is the login user's ($XDG_STATE_HOME/sleuth/servers, else
~/.local/state/sleuth/servers): each test's own locally (conftest gives every test its own
XDG_STATE_HOME), the test sshd's temporary HOME's over SSH, shared by the tests using it. So
records are dated in the year 2000, to sort before every real server, and each test's ids
carry their own random hex, so parallel workers never share one.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import server_ctl
from sleuth.tools.serving.ctl import Listing, ctl

# A pid no process can have: pids stay below pid_max.
DEAD_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1000


def state_of(host: SandboxedHost) -> Path:
    """The host's server record folder, as its own server_ctl names it."""
    return Path(ctl(host, "list", {"limit": 0}, Listing).folder)


def local_state() -> Path:
    """This machine's server record folder for this test (its XDG_STATE_HOME)."""
    return Path(server_ctl.state_dir())


class Records:
    """Server records this test writes into a host's real state folder, removed after it (as a
    context manager)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.hex = secrets.token_hex(3)
        self.made: list[Path] = []

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *_: object) -> None:
        for folder in self.made:
            shutil.rmtree(folder, ignore_errors=True)

    def write(
        self, day: int, n: int, pid: int = DEAD_PID, argv: list[str] | None = None, **fields: Any
    ) -> str:
        """A record of server `n` started on 2000-01-DAY; `fields` replace its own (None
        removes one)."""
        sid = f"srv-200001{day:02d}-{n:06d}-{self.hex}"
        folder = self.state / sid
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700)
        self.made.append(folder)
        (folder / "server.log").write_text("a server of the year 2000\n")
        if pid == DEAD_PID:
            (folder / "exit_code").write_text("0\n")
        record: dict[str, Any] = {
            "id": sid,
            "engine": "command",
            "pid": pid,
            "pgid": pid,
            "port": 1,
            "argv": argv or ["true"],
            "env_names": [],
            "ready": {"log_line": "ready"},
            "started_at": 946_684_800.0 + day * 86_400 + n,
            "log": str(folder / "server.log"),
            "exit_file": str(folder / "exit_code"),
            "dir": str(folder),
        }
        if pid != DEAD_PID:  # a live server's record names its first process's start
            record["start_ticks"] = server_ctl.start_ticks(pid)
        record.update(fields)
        record = {k: v for k, v in record.items() if v is not None}
        (folder / "record.json").write_text(json.dumps(record))
        return sid


def local_or_remote(request: pytest.FixtureRequest, root: Path) -> SandboxedHost:
    """This machine as the local host (request.param "local"), or over the test sshd."""
    if request.param == "local":
        return SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    made: SandboxedHost = request.getfixturevalue("ssh_host_factory")("remote", [str(root)])
    return made


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def running(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A process for a test to name in a record or find on the host, killed after."""
    proc = subprocess.Popen(argv, **popen)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
