"""Sleuth's host program over the real sshd: roots that hold while symlinks are swapped, one
login shell per connection, a checked protocol, and a program that dies or hangs replaced.

Every test runs with the program resident for the connection and once per call (`ssh_calls`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.agent.session import describe_hosts
from sleuth.config import HostConfig, Limits
from sleuth.errors import ErrorKind
from sleuth.hosts import wire
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import program
from sleuth.hosts.program.resident import PROTOCOL
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer

pytestmark = pytest.mark.ssh

CANARY = f"SLEUTH-OUTSIDE-{secrets.token_hex(8)}"
READS = 200


def connect(server: SSHServer, tmp_path: Path, calls: Any, **kw: Any) -> SSHHost:
    return SSHHost(
        "remote",
        server.alias,
        known_hosts=tmp_path / "sleuth_known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
        calls=calls,
        **kw,
    )


def context(host: SSHHost, root: Path, limits: Limits | None = None) -> ToolContext:
    limits = limits or Limits()
    sandbox = SandboxedHost("remote", host, HostConfig(roots=[str(root)]), limits)
    return ToolContext(hosts={"remote": sandbox}, limits=limits)


@pytest.fixture
def host(sshd: SSHServer, tmp_path: Path, ssh_calls: str) -> Iterator[SSHHost]:
    made = connect(sshd, tmp_path, ssh_calls)
    yield made
    made.close()


def read(ctx: ToolContext, tool: str, **args: Any) -> Any:
    return execute(ctx, tool, {"host": "remote", **args})


# ---------------------------------------------------------------- roots under a race


class Exchange:
    """Swaps two paths atomically (renameat2 RENAME_EXCHANGE), or in two renames where the C
    library has no renameat2: either way a path flips between what it was and the other."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.renameat2 = getattr(libc, "renameat2", None)

    def __call__(self, a: Path, b: Path) -> None:
        if self.renameat2 is not None:
            at_fdcwd, rename_exchange = -100, 2
            if self.renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange) == 0:
                return
        spare = a.with_name(a.name + ".swap")
        os.rename(a, spare)
        os.rename(b, a)
        os.rename(spare, b)


@pytest.fixture
def resident_only(ssh_calls: str) -> None:
    """Only a resident program lives between calls, to be killed or hung there."""
    if ssh_calls == "exec":
        pytest.skip("the exec path starts a program per call: none lives between calls")


@pytest.fixture
def racing_tree(tmp_path: Path) -> Iterator[Path]:
    """A root whose `link` (a file) and `d` (a folder) flip, in a loop, between something
    inside the roots and something outside them that holds the canary."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real_d").mkdir(parents=True)
    (outside / "d").mkdir(parents=True)
    (root / "inside.txt").write_text("inside line\n" * 3)
    (root / "inside.json").write_text(json.dumps({"where": "inside"}))
    (root / "real_d" / "f.txt").write_text("inside line\n")
    (outside / "secret.txt").write_text(f"{CANARY}\n" * 3)
    (outside / "secret.json").write_text(json.dumps({"where": CANARY}))
    (outside / "d" / "f.txt").write_text(f"{CANARY}\n")
    pairs = []
    for name, inside, out in (
        ("link", "inside.txt", outside / "secret.txt"),
        ("j.json", "inside.json", outside / "secret.json"),
    ):
        (root / name).symlink_to(inside)
        (root / f".{name}.other").symlink_to(out)
        pairs.append((root / name, root / f".{name}.other"))
    (root / "d").symlink_to("real_d")
    (root / ".d.other").symlink_to(outside / "d")
    pairs.append((root / "d", root / ".d.other"))
    # A real folder swapped with a link out: the path checked is real, the one opened is not.
    (root / "dir").mkdir()
    (root / "dir" / "f.txt").write_text("inside line\n")
    (root / ".dir.other").symlink_to(outside / "d")
    pairs.append((root / "dir", root / ".dir.other"))
    stop = threading.Event()
    exchange = Exchange()

    def flip() -> None:
        while not stop.is_set():
            for a, b in pairs:
                exchange(a, b)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        yield root
    finally:
        stop.set()
        flipper.join()


RACED: list[tuple[str, dict[str, Any]]] = [
    ("read_lines", {"path": "link"}),
    ("read_lines", {"path": "d/f.txt"}),
    ("read_lines", {"path": "dir/f.txt"}),
    ("read_json", {"path": "j.json"}),
    ("grep", {"pattern": "line", "path": "dir", "context": 1}),
    ("grep", {"pattern": "line", "path": "link"}),
    ("list_dir", {"path": "dir"}),
]


def test_a_symlink_swapped_in_a_loop_never_leads_outside_the_roots(
    host: SSHHost, racing_tree: Path
) -> None:
    ctx = context(host, racing_tree)
    inside = refused = 0
    for i in range(READS):
        tool, args = RACED[i % len(RACED)]
        result = read(ctx, tool, **args)
        seen = result.output + (result.error or "") + json.dumps(result.data, default=str)
        assert CANARY not in seen, f"read {i} ({tool} {args}) got a byte from outside: {seen}"
        assert str(racing_tree.parent / "outside") not in seen, "a link's target was shown"
        inside += result.ok and ("inside" in result.output)
        refused += "outside the roots" in (result.error or "")
    # Both outcomes happened: the race was on, and reads inside still work during it.
    assert inside >= READS // 10 and refused >= READS // 20, (inside, refused)
    assert host.call_mode() == host.programs.calls


# ---------------------------------------------------------------- one shell per connection


def test_the_login_shell_starts_once_per_connection_when_resident(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, ssh_calls: str
) -> None:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("".join(f"line {i}\n" for i in range(50)))
    (root / "config.json").write_text(json.dumps({"n": 1}))
    with SSHServer.create(tmp_path_factory.mktemp("bashrc-sshd")) as server:
        starts = server.home / "starts.log"
        (server.home / ".bashrc").write_text(f'echo start >> "{starts}"\n')
        host = connect(server, tmp_path, ssh_calls)
        ctx = context(host, root)
        calls = 0
        try:
            for _ in range(5):
                for tool, args in (
                    ("read_lines", {"path": "src/a.py", "start": 3, "end": 9}),
                    ("grep", {"pattern": "line 1", "path": "src"}),
                    ("list_dir", {"path": "."}),
                    ("read_json", {"path": "config.json"}),
                ):
                    assert read(ctx, tool, **args).ok
                    calls += 1
        finally:
            host.close()
        shells = starts.read_text().count("start\n")
    if ssh_calls == "resident":
        assert shells == 1, f"{shells} login shells for {calls} calls on one connection"
    else:  # the exec path pays the shell for every request
        assert shells > calls


# ---------------------------------------------------------------- protocol


@pytest.fixture
def tampered(monkeypatch: pytest.MonkeyPatch) -> Callable[[bytes, bytes], None]:
    """Send the host a program whose source has `old` replaced by `new`."""

    def tamper(old: bytes, new: bytes) -> None:
        source = program("resident.py")
        assert old in source
        changed = source.replace(old, new)
        monkeypatch.setattr(
            wire, "program", lambda name: changed if name == "resident.py" else program(name)
        )
        wire.Bundle.of.cache_clear()

    yield tamper
    wire.Bundle.of.cache_clear()


def test_a_program_speaking_another_protocol_is_refused_naming_both(
    host: SSHHost, tmp_path: Path, tampered: Callable[[bytes, bytes], None]
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    tampered(f"PROTOCOL = {PROTOCOL}\n".encode(), b"PROTOCOL = 999\n")
    result = read(context(host, tmp_path), "read_lines", path="a.txt")
    assert not result.ok and result.error_kind == ErrorKind.HOST
    assert "protocol 999" in (result.error or "")
    assert f"speaks protocol {PROTOCOL}" in (result.error or "")


def test_a_program_other_than_the_one_sent_is_refused(
    host: SSHHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    sent = wire.Bundle.of
    monkeypatch.setattr(
        wire.Bundle, "of", staticmethod(lambda modules: wire.Bundle(sent(modules).stdin, "0" * 64))
    )
    result = read(context(host, tmp_path), "read_lines", path="a.txt")
    assert not result.ok and "0000000000000000" in (result.error or "")
    assert "refusing to use it" in (result.error or "")


# ---------------------------------------------------------------- crashes and hangs


@pytest.mark.usefixtures("resident_only")
def test_a_program_killed_mid_session_is_replaced_and_the_call_answered(
    host: SSHHost, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    ctx = context(host, tmp_path)
    assert "alpha" in read(ctx, "read_lines", path="a.txt").output
    first = host.programs.running("python3")
    assert first is not None and host.programs.starts == 1
    os.kill(first.pid, signal.SIGKILL)
    result = read(ctx, "read_lines", path="a.txt")
    assert result.ok and "alpha" in result.output
    second = host.programs.running("python3")
    assert host.programs.starts == 2 and second is not None and second.pid != first.pid


@pytest.mark.usefixtures("resident_only")
def test_a_request_in_flight_when_the_program_dies_is_sent_again(
    host: SSHHost, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    ctx = context(host, tmp_path)
    assert read(ctx, "read_lines", path="a.txt").ok
    first = host.programs.running("python3")
    assert first is not None
    os.kill(first.pid, signal.SIGSTOP)  # it takes the request and never answers
    threading.Timer(1.0, os.kill, (first.pid, signal.SIGKILL)).start()
    result = read(ctx, "read_lines", path="a.txt")
    assert result.ok and "alpha" in result.output
    assert host.programs.starts == 2


@pytest.mark.usefixtures("resident_only")
def test_a_hung_program_is_killed_replaced_and_the_call_answered(
    sshd: SSHServer, tmp_path: Path, ssh_calls: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    host = connect(sshd, tmp_path, ssh_calls)
    ctx = context(host, tmp_path, Limits(timeout_s=1))
    assert read(ctx, "read_lines", path="a.txt").ok
    first = host.programs.running("python3")
    assert first is not None
    try:
        os.kill(first.pid, signal.SIGSTOP)
        start = time.monotonic()
        result = read(ctx, "read_lines", path="a.txt")
        assert result.ok and "alpha" in result.output
        assert time.monotonic() - start < 30
        assert host.programs.starts == 2
        deadline = time.monotonic() + 10
        while Path(f"/proc/{first.pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{first.pid}").exists(), "the hung program was left running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGKILL)
        host.close()


def test_a_program_that_crashes_on_every_request_is_reported_after_one_retry(
    host: SSHHost, tmp_path: Path, tampered: Callable[[bytes, bytes], None]
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    tampered(
        b"def op_resolve(req",
        b"def op_resolve(req=None, ctx=None):\n    os._exit(7)\n\n\ndef _old(req",
    )
    result = read(context(host, tmp_path), "read_lines", path="a.txt")
    assert not result.ok and result.error_kind == ErrorKind.HOST
    assert "again on a freshly started one" in (result.error or "")


# ---------------------------------------------------------------- fallbacks and concurrency


def test_a_program_that_will_not_start_falls_back_to_posix_tools(
    sshd: SSHServer, tmp_path: Path, ssh_calls: str
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    host = connect(sshd, tmp_path, ssh_calls, python="false")
    try:
        sandbox = SandboxedHost(
            "remote", host, HostConfig(roots=[str(tmp_path)], python="false"), Limits()
        )
        ctx = ToolContext(hosts={"remote": sandbox})
        result = read(ctx, "read_lines", path="a.txt")
        assert result.ok and "alpha" in result.output
        facts = host.describe()
        assert facts.call_mode == "posix"
        assert any("would not start" in w for w in facts.warnings), facts.warnings
    finally:
        host.close()


def test_closing_the_host_ends_its_program(sshd: SSHServer, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    host = connect(sshd, tmp_path, "resident")
    assert read(context(host, tmp_path), "read_lines", path="a.txt").ok
    running = host.programs.running("python3")
    assert running is not None and Path(f"/proc/{running.pid}").exists()
    host.close()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{running.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{running.pid}").exists(), "the program outlived its connection"


def test_the_transcript_records_how_files_were_reached(host: SSHHost, tmp_path: Path) -> None:
    (infos,) = describe_hosts(context(host, tmp_path))
    assert infos.call_mode == host.programs.calls


def test_a_missing_interpreter_is_a_fallback_every_time(
    sshd_no_sftp: SSHServer, tmp_path: Path
) -> None:
    """The shell may close the channel before the program is all sent: still a fallback."""
    for _ in range(20):
        host = connect(sshd_no_sftp, tmp_path, "resident")
        try:
            with pytest.raises(wire.NoProgram, match="no-such-python3 was not found"):
                host.request("no-such-python3", {"op": "ping"}, timeout=5)
        finally:
            host.close()


def test_many_calls_in_flight_share_one_program(host: SSHHost, tmp_path: Path) -> None:
    for i in range(16):
        (tmp_path / f"f{i}.txt").write_text("".join(f"file {i} line {n}\n" for n in range(40)))
    ctx = context(host, tmp_path)

    def one(i: int) -> str:
        result = read(ctx, "read_lines", path=f"f{i % 16}.txt", start=3, end=5)
        assert result.ok, result.error
        return result.output

    with ThreadPoolExecutor(16) as pool:
        outputs = list(pool.map(one, range(64)))
    for i, output in enumerate(outputs):
        assert (
            f"     3\tfile {i % 16} line 2" in output and f"     5\tfile {i % 16} line 4" in output
        )
    assert host.programs.starts == (1 if host.programs.calls == "resident" else 0)
    assert host.describe().call_mode == host.programs.calls
