"""Server records someone else wrote, tried as an attacker would (issue 39, finding 9).

server_ctl once kept records in /tmp/sleuth-servers, used that folder whoever had made it and
trusted every record in it: another local user who planted a record there made
`server_status` read any file as the login user (the record's `log`) and `stop_server` signal
any process (its `pid`/`pgid`). Records now live in the login user's own state folder, which
must be theirs alone (and every folder above it), as must each record; a record that fails is
ignored and named. The tests run as root, so the other user is `nobody` (uid 65534), whose
files root can make. Locally, over the test sshd and through an MCP client.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.errors import ErrorKind
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.serving.ctl import Stopped, ctl
from tests.mcp_support import McpProject, text_of
from tests.server_records import Records, local_or_remote, pid_alive, running, state_of
from tests.sshd import SSHServer

from . import figures

NOBODY = 65534
SECRET = "planted-record-secret-" + "q" * 12


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="test")


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the login user's that a planted record names as its server."""
    with running(["sleep", "60"], start_new_session=True) as proc:
        yield proc


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    """A file the login user can read, outside every root."""
    path = tmp_path / "private" / "id_key"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture(params=["local", "remote"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxedHost:
    root = tmp_path / "root"
    root.mkdir()
    made = local_or_remote(request, root)
    made.config.allow = ["stop_server"]
    return made


def plant(folder: Path, sid: str, pid: int, log: Path) -> Path:
    """What the other user writes: a record folder and record.json of theirs."""
    made = folder / sid
    made.mkdir(mode=0o755)
    record = {
        "id": sid,
        "engine": "command",
        "pid": pid,
        "pgid": pid,
        "port": 1,
        "argv": ["true"],
        "env_names": [],
        "ready": {"log_line": "ready"},
        "started_at": 946_684_800.0,
        "log": str(log),
        "exit_file": str(made / "exit_code"),
        "dir": str(made),
    }
    (made / "record.json").write_text(json.dumps(record))
    for path in (made, made / "record.json"):
        os.chown(path, NOBODY, NOBODY)
    return made


@pytest.fixture
def old_shared_folder() -> Iterator[Path]:
    """/tmp/sleuth-servers as another user leaves it: theirs, writable by all (made now if no
    one has, removed after if this test made it)."""
    folder = Path("/tmp/sleuth-servers")  # literal: the old code has no OLD_STATE_DIR
    made = False
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
        folder.chmod(0o1777)
        made = True
    try:
        yield folder
    finally:
        if made:
            shutil.rmtree(folder, ignore_errors=True)


def obeyed(victim: subprocess.Popen[bytes], *shown: str) -> None:
    """Count one planted-record attack, and whether it got through."""
    figures.count("records_planted_tries")
    figures.count("records_planted_obeyed", int(any(SECRET in s for s in shown)))
    figures.count("records_planted_obeyed", int(not pid_alive(victim.pid)))


def sid() -> str:
    return f"srv-20000101-000000-{secrets.token_hex(3)}"


def status_and_stop(host: SandboxedHost, server_id: str) -> tuple[str, str]:
    ctx = ToolContext(hosts={host.name: host}, approver=approve)
    status = execute(ctx, "server_status", {"host": host.name, "server_id": server_id})
    stop = execute(ctx, "stop_server", {"host": host.name, "server_id": server_id})
    return status.output + (status.error or ""), stop.output + (stop.error or "")


def test_a_record_planted_in_the_old_shared_folder_is_never_read(
    host: SandboxedHost,
    old_shared_folder: Path,
    victim: subprocess.Popen[bytes],
    secret_file: Path,
) -> None:
    server_id = sid()
    planted = plant(old_shared_folder, server_id, victim.pid, secret_file)
    try:
        status, stop = status_and_stop(host, server_id)
    finally:
        shutil.rmtree(planted, ignore_errors=True)
    obeyed(victim, status, stop)
    assert SECRET not in status
    assert pid_alive(victim.pid), "stop_server signalled the process a planted record named"
    assert f"no server {server_id}" in status and "anyone can write that folder" in status
    assert f"no server {server_id}" in stop


@pytest.fixture
def unwritable_by_others(host: SandboxedHost) -> Iterator[Path]:
    """The host's state folder; its owner and mode put back after the test."""
    folder = state_of(host)
    folder.mkdir(parents=True, exist_ok=True)
    before = folder.stat()
    above = folder.parent.stat()
    try:
        yield folder
    finally:
        os.chown(folder, before.st_uid, before.st_gid)
        folder.chmod(stat.S_IMODE(before.st_mode))
        folder.parent.chmod(stat.S_IMODE(above.st_mode))


@pytest.mark.parametrize("how", ["theirs", "open to all", "below a folder open to all"])
def test_a_state_folder_others_can_write_is_refused_and_named(
    host: SandboxedHost,
    unwritable_by_others: Path,
    victim: subprocess.Popen[bytes],
    secret_file: Path,
    how: str,
) -> None:
    folder = unwritable_by_others
    server_id = sid()
    planted = plant(folder, server_id, victim.pid, secret_file)
    if how == "theirs":
        os.chown(folder, NOBODY, NOBODY)
    elif how == "open to all":
        folder.chmod(0o777)
    else:
        folder.parent.chmod(0o777)
    try:
        ctx = ToolContext(hosts={host.name: host}, approver=approve)
        listed = execute(ctx, "server_status", {"host": host.name})
        status, stop = status_and_stop(host, server_id)
    finally:
        shutil.rmtree(planted, ignore_errors=True)

    obeyed(victim, status, stop, listed.output)
    assert not listed.ok and listed.error_kind == ErrorKind.POLICY
    named = str(folder.parent) if how.startswith("below") else str(folder)
    assert f"the server record folder {folder} is" in (listed.error or "")
    assert named in (listed.error or "") and "Fix:" in (listed.error or "")
    assert SECRET not in status and "reads none of it" in status
    assert pid_alive(victim.pid) and "reads none of it" in stop


def test_a_record_someone_else_wrote_is_ignored_and_named(
    host: SandboxedHost, victim: subprocess.Popen[bytes], secret_file: Path
) -> None:
    folder = state_of(host)
    with Records(folder) as records:
        good = records.write(1, 0)
        server_id = sid()
        planted = plant(folder, server_id, victim.pid, secret_file)
        records.made.append(planted)
        ctx = ToolContext(hosts={host.name: host}, approver=approve)
        listed = execute(ctx, "server_status", {"host": host.name})
        status, stop = status_and_stop(host, server_id)

    obeyed(victim, status, stop, listed.output)
    assert listed.ok, listed.error
    shown = [s["server_id"] for s in listed.data["servers"]]
    assert good in shown and server_id not in shown
    [ignored] = [i for i in listed.data["ignored"] if i["id"] == server_id]
    assert f"owned by uid {NOBODY}" in ignored["why"]
    assert f"IGNORED record {server_id}: " in listed.output
    assert SECRET not in status and "so it is ignored" in status
    assert pid_alive(victim.pid) and "so it is ignored" in stop


def test_a_record_reads_only_its_own_folder_and_is_written_0600(
    host: SandboxedHost, secret_file: Path
) -> None:
    """Even the login user's own record cannot send a read elsewhere: its log is its folder's."""
    with Records(state_of(host)) as records:
        server_id = records.write(2, 0, log=str(secret_file), exit_file=str(secret_file))
        ctx = ToolContext(hosts={host.name: host}, approver=approve)
        status = execute(ctx, "server_status", {"host": host.name, "server_id": server_id})
        ctl(host, "stop", {"id": server_id, "grace_s": 0.0}, Stopped)
        mode = stat.S_IMODE((records.state / server_id / "record.json").stat().st_mode)

    figures.count("records_planted_tries")
    figures.count("records_planted_obeyed", int(SECRET in status.output))
    assert status.ok, status.error
    assert SECRET not in status.output and "a server of the year 2000" in status.output
    assert mode == 0o600


def test_a_planted_record_is_not_read_through_an_mcp_client(
    tmp_path: Path,
    sshd: SSHServer,
    old_shared_folder: Path,
    victim: subprocess.Popen[bytes],
    secret_file: Path,
) -> None:
    project = McpProject.create(tmp_path, sshd, allow=["stop_server"])
    toml = project.root / "sleuth.toml"
    rule = '\n[hosts.{}.approve]\ntools = ["stop_server"]\n'
    toml.write_text(toml.read_text() + rule.format("local") + rule.format("remote"))
    server_id = sid()
    planted = plant(old_shared_folder, server_id, victim.pid, secret_file)
    said: list[str] = []

    async def session() -> None:
        async with project.client("stdio") as client:
            for host in ("local", "remote"):
                for tool in ("server_status", "stop_server"):
                    result = await client.call_tool(tool, {"host": host, "server_id": server_id})
                    said.append(text_of(result) + json.dumps(result.structured_content))

    try:
        anyio.run(session)
    finally:
        shutil.rmtree(planted, ignore_errors=True)
    obeyed(victim, *said, *(p.read_text() for p in project.transcript_paths()))
    assert len(said) == 4 and all(f"no server {server_id}" in s for s in said)
    assert not any(SECRET in s for s in said)
    assert pid_alive(victim.pid)
    assert SECRET not in "".join(p.read_text() for p in project.transcript_paths())


def test_the_local_host_without_a_state_folder_lists_nothing(tmp_path: Path) -> None:
    """The control: no folder yet (a host Sleuth never started a server on) is no error."""
    host = SandboxedHost("local", LocalHost(), HostConfig(), Limits())
    ctx = ToolContext(hosts={"local": host}, approver=approve)
    listed = execute(ctx, "server_status", {"host": "local"})
    assert listed.ok and listed.data["servers"] == [] and listed.data["ignored"] == []
    assert listed.data["folder"] == str(tmp_path / "state" / "sleuth" / "servers")
