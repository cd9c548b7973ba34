"""`sleuth mcp` started as a user starts it (a subprocess), and the official SDK's client.

```python
project = McpProject.create(tmp_path, sshd)             # sleuth.toml: local + "remote" (sshd)
async with project.client("stdio") as client:           # or "http"; mode="legacy" for 2025-11-25
    await client.call_tool("read_lines", {"host": "remote", "path": "notes.txt"})
events = project.transcript()                            # the one session's events, parsed
```
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from sleuth.transcripts.events import Event
from sleuth.transcripts.store import load
from tests.sshd import SSHServer, free_port

NOTES = "line one\nline two\nmagic word 42\n"
SECRET = "the-outside-secret-7f3a"
CLIENT = types.Implementation(name="sleuth-tests", version="1.2.3")
TOKEN = "test-token-" + "t" * 24


@dataclass(frozen=True)
class Served:
    url: str
    pid: int
    token: str = TOKEN

    def client(self, **options: Any) -> Client:
        """The official client, sending this server's bearer token."""
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"})
        return Client(streamable_http_client(self.url, http_client=http), **options)


@dataclass
class McpProject:
    """A folder with sleuth.toml, a file inside the roots and one outside them."""

    root: Path
    outside: Path
    home: Path | None

    @classmethod
    def create(
        cls, tmp_path: Path, sshd: SSHServer | None = None, allow: list[str] | None = None
    ) -> McpProject:
        root = tmp_path / "project"
        root.mkdir()
        (root / "notes.txt").write_text(NOTES)
        outside = tmp_path / "outside.txt"
        outside.write_text(SECRET + "\n")
        allowed = repr(allow or [])
        toml = (
            f'known_hosts = "{tmp_path}/sleuth_known_hosts"\n\n'
            f'[hosts.local]\nroots = ["{root}"]\nallow = {allowed}\n'
        )
        if sshd is not None:
            toml += (
                f'\n[hosts.remote]\nssh = "{sshd.alias}"\nroots = ["{root}"]\nallow = {allowed}\n'
            )
        (root / "sleuth.toml").write_text(toml.replace("'", '"'))
        return cls(root, outside, sshd.home if sshd is not None else None)

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
        if self.home is not None:
            env["HOME"] = str(self.home)
        return env

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """`sleuth ARGS` run in the project, as its user would (wide, so nothing wraps)."""
        return subprocess.run(
            [sys.executable, "-m", "sleuth.cli", *args],
            cwd=self.root,
            env={**self.env(), "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "sleuth.cli", "mcp", *extra]

    def stdio(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=self.argv()[0], args=self.argv()[1:], cwd=str(self.root), env=self.env()
        )

    @contextlib.contextmanager
    def http_server(
        self,
        *extra: str,
        env: dict[str, str] | None = None,
        bind: str = "127.0.0.1",
        token: str | None = TOKEN,
    ) -> Iterator[Served]:
        """`sleuth mcp --http BIND:PORT` running with `token` (None: no SLEUTH_MCP_TOKEN, so
        the server makes one up and says it on stderr); SIGTERM at the end."""
        port = free_port()
        environ = {k: v for k, v in self.env().items() if k != "SLEUTH_MCP_TOKEN"}
        environ |= {"SLEUTH_MCP_TOKEN": token} if token else {}
        environ |= env or {}
        proc = subprocess.Popen(
            self.argv("--http", f"{bind}:{port}", *extra),
            cwd=self.root,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for_port(port, proc, bind.strip("[]"))
            given = environ.get("SLEUTH_MCP_TOKEN") or told_token(proc)
            host = bind if ":" not in bind or bind.startswith("[") else f"[{bind}]"
            yield Served(f"http://{host}:{port}/mcp", proc.pid, given)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    @contextlib.asynccontextmanager
    async def client(
        self,
        transport: str,
        *,
        mode: str = "auto",
        elicit: ElicitationFnT | None = None,
    ) -> AsyncIterator[Client]:
        if transport == "stdio":
            async with Client(
                self.stdio(), mode=mode, client_info=CLIENT, elicitation_callback=elicit
            ) as client:
                yield client
            return
        with self.http_server() as served:
            async with served.client(
                mode=mode, client_info=CLIENT, elicitation_callback=elicit
            ) as client:
                yield client

    def transcript_paths(self) -> list[Path]:
        return sorted(self.transcripts.glob("*.jsonl"))

    def transcript(self) -> list[Event]:
        """The one session's events (the test made exactly one session)."""
        paths = self.transcript_paths()
        assert len(paths) == 1, paths
        return load(paths[0]).events


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], host: str = "127.0.0.1", timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"sleuth mcp --http exited {proc.returncode}: {err}")
        with socket.socket(family) as sock:
            if sock.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"sleuth mcp --http did not listen on {port} in {timeout} s")


def told_token(proc: subprocess.Popen[bytes]) -> str:
    """The token `sleuth mcp --http` made up and printed, read from its stderr."""
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"this run's token is (\S+)", line.decode())
        if found:
            return found.group(1)
    raise AssertionError("sleuth mcp --http printed no token")


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def call_id_of(result: types.CallToolResult) -> str:
    meta: dict[str, Any] = result.meta or {}
    return str(meta["sleuth/call_id"])


class Answering:
    """An elicitation callback that answers every question the same way, and keeps them."""

    def __init__(self, action: Literal["accept", "decline", "cancel"], approve: bool = True):
        self.action, self.approve = action, approve
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)


def tcp_connections(pid: int, remote_port: int) -> int:
    """Established TCP connections process `pid` holds to `remote_port` on this machine."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == remote_port:
                count += inode in inodes
    return count


def mcp_server_pid() -> int:
    """The `sleuth mcp` process a stdio client of this process started."""
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            if b"sleuth.cli\x00mcp" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise RuntimeError("no `sleuth mcp` process among this process's children")
