"""server_status's list and `sleuth servers` on a host that keeps many records, and server
control answers Sleuth cannot read, against the real program on a local host and over sshd.

server_ctl keeps every server's record and log in the login user's state folder for a person to
read, so a busy host gathers thousands. These tests write records of their own there
(tests/server_records.py), and remove exactly those folders after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import server_ctl
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from sleuth.tools.results import ToolError
from sleuth.tools.serving.ctl import ANSWER_CAP, Listing, LogText, ctl
from tests.server_records import Records, local_or_remote, local_state, running, state_of


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process, for a record that server_ctl must see as a running server."""
    with running(["sleep", "60"], start_new_session=True) as proc:
        yield proc


@pytest.fixture(params=["local", "remote"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxedHost:
    """The local host, or the same machine over sshd (whose login has its own HOME)."""
    return local_or_remote(request, tmp_path)


@pytest.fixture
def records(host: SandboxedHost) -> Iterator[Records]:
    with Records(state_of(host)) as made:
        yield made


@pytest.fixture
def local_records() -> Iterator[Records]:
    with Records(local_state()) as made:
        yield made


def list_servers(host: SandboxedHost) -> tuple[dict[str, Any], str]:
    ctx = ToolContext(hosts={host.name: host}, approver=deny_all)
    result = execute(ctx, "server_status", {"host": host.name})
    assert result.ok, result.output
    return result.data, result.output


def test_the_list_shows_every_live_server_and_the_newest_ended_and_counts_the_rest(
    host: SandboxedHost, records: Records, sleeper: subprocess.Popen[bytes]
) -> None:
    live = records.write(1, 0, pid=sleeper.pid)  # older than every ended one
    ended = [records.write(2, n) for n in range(120)]
    data, output = list_servers(host)

    shown = [s["server_id"] for s in data["servers"]]
    assert shown == sorted(shown)  # oldest first, as before
    assert sum(not s["alive"] for s in data["servers"]) <= server_ctl.LIST_LIMIT
    mine = [sid for sid in shown if sid in ended]
    assert mine == ended[len(ended) - len(mine) :]  # the newest of them, if any
    assert data["older_not_shown"] >= len(ended) - len(mine) >= 70
    assert {s["server_id"]: s["alive"] for s in data["servers"]}[live] is True
    assert output.splitlines()[-1] == (
        f"... and {data['older_not_shown']:,} older ended servers not shown "
        f"(records under {records.state} on the host)"
    )
    assert data["folder"] == str(records.state) and data["ignored"] == []


def test_a_host_with_thousands_of_records_still_lists(local_records: Records) -> None:
    """The defect itself: 2,200 ended servers with a 2 KB command each made an answer over
    ANSWER_CAP, which was cut and failed to parse ("internal error in server_status")."""
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m" * 1000]
    for n in range(2_200):
        local_records.write(3, n, argv=argv)
    assert 2_200 * len(json.dumps(argv)) > ANSWER_CAP
    host = SandboxedHost("local", LocalHost(), HostConfig(), Limits())
    data, _ = list_servers(host)
    assert len(data["servers"]) < 1_000
    assert data["older_not_shown"] >= 2_200 - server_ctl.LIST_LIMIT


def test_an_answer_over_the_cap_is_a_tool_error_that_names_the_cut(
    host: SandboxedHost, records: Records
) -> None:
    sid = records.write(4, 0)
    log = records.state / sid / "server.log"
    log.write_bytes(b"x" * (ANSWER_CAP + (1 << 20)))
    with pytest.raises(ToolError) as caught:
        ctl(host, "log", {"id": sid, "bytes": ANSWER_CAP * 2}, LogText)
    message = str(caught.value)
    assert f"server control (log) on host {host.name!r} passed {ANSWER_CAP:,} bytes" in message
    assert "was cut" in message


def test_an_answer_that_is_not_json_is_a_tool_error_that_names_the_command(
    tmp_path: Path,
) -> None:
    """The host's python prints a line after the program's answer (a wrapper, a profile)."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\n"{sys.executable}" "$@"\necho "welcome to the host {{"\n')
    python.chmod(0o755)
    host = SandboxedHost("local", LocalHost(), HostConfig(python=str(python)), Limits())
    with pytest.raises(ToolError) as caught:
        ctl(host, "list", {}, Listing)
    assert "server control (list) on host 'local' answered with a line that is not" in str(
        caught.value
    )
    ctx = ToolContext(hosts={"local": host}, approver=deny_all)
    result = execute(ctx, "server_status", {"host": "local"})
    assert not result.ok and "internal error" not in (result.error or "")
    assert "not a JSON object" in (result.error or "")


def test_sleuth_servers_says_how_many_older_servers_it_left_out(
    tmp_path: Path, local_records: Records
) -> None:
    for n in range(server_ctl.LIST_LIMIT + 5):
        local_records.write(5, n)
    (tmp_path / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{tmp_path}"]\n')

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "sleuth.cli", "servers", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    older = json.loads(cli("--json"))["older_not_shown"]
    assert older >= 5
    assert f"older ended servers not shown (records under {local_records.state}" in cli()
