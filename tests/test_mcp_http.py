"""`sleuth mcp --http`: sessions by Mcp-Session-Id, concurrent calls over one SSH connection,
and who may bind where."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sleuth.transcripts.verify import verify
from tests.mcp_support import CLIENT, McpProject, Served, tcp_connections, text_of
from tests.sshd import SSHServer


def test_a_client_that_ends_its_http_session_ends_its_transcript(
    tmp_path: Path, sshd: SSHServer
) -> None:
    project = McpProject.create(tmp_path, sshd)
    reports = []

    async def two_sessions(served: Served) -> None:
        for _ in range(2):
            async with served.client(mode="legacy", client_info=CLIENT) as client:
                await client.call_tool("read_lines", {"host": "remote", "path": "notes.txt"})
            # The client sent DELETE on the way out; the server is still running.
            reports.append([verify(p) for p in project.transcript_paths()])

    with project.http_server() as served:
        anyio.run(two_sessions, served)

    first, second = reports
    assert len(first) == 1 and first[0].ok and first[0].ended
    assert len(second) == 2 and all(r.ok and r.ended for r in second)


def test_concurrent_calls_on_one_ssh_host_share_its_one_connection(
    tmp_path: Path, sshd: SSHServer
) -> None:
    project = McpProject.create(tmp_path, sshd)
    for i in range(8):
        (project.root / f"part{i}.txt").write_text(f"part {i}\n")
    results: dict[int, types.CallToolResult] = {}
    connections: list[int] = []

    async def calls(served: Served) -> None:
        async with served.client(client_info=CLIENT) as client:

            async def one(i: int) -> None:
                args = {"host": "remote", "path": f"part{i}.txt"}
                results[i] = await client.call_tool("read_lines", args)

            async with anyio.create_task_group() as group:
                for i in range(8):
                    group.start_soon(one, i)
            connections.append(tcp_connections(served.pid, sshd.port))

    with project.http_server() as served:
        anyio.run(calls, served)

    assert all(f"part {i}" in text_of(results[i]) for i in range(8))
    assert connections == [1]


def test_a_wrong_or_missing_token_gets_401(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path)
    token = "t" * 32
    with project.http_server(env={"SLEUTH_MCP_TOKEN": token}) as served:
        for given in (None, "Bearer wrong"):
            request = urllib.request.Request(served.url, data=b"{}", method="POST")
            if given:
                request.add_header("Authorization", given)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401

        async def listed() -> list[str]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            transport = streamable_http_client(served.url, http_client=http)
            async with http, Client(transport, client_info=CLIENT) as client:
                return [t.name for t in (await client.list_tools()).tools]

        assert "read_lines" in anyio.run(listed)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--http", "0.0.0.0:8765"], {}, "add --allow-remote"),
        (["--http", "0.0.0.0:8765", "--allow-remote"], {}, "needs SLEUTH_MCP_TOKEN"),
        (["--http", "8765"], {}, "give HOST:PORT"),
    ],
)
def test_binding_beyond_loopback_needs_the_flag_and_a_token(
    tmp_path: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    project = McpProject.create(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "mcp", *args],
        cwd=project.root,
        env={**project.env(), "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert says in proc.stderr
