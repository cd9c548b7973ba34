"""Secrets in the newer outputs, tried as an attacker would (issue 39, finding 7).

A server started with `--api-key=KEY` put KEY in server_processes' `flags[].value` (MCP
structured content, `--json`, the transcript); `sleuth bench` printed the key a server echoed
back, and kept it and a URL's password in world-readable records and the aiperf export;
server_status cut command lines where a URL's password showed. Redaction now comes before
every cut, on every field, and the records are 0600. Each secret here has no shape redaction
knows by itself: only its key, its flag or the header it was sent in marks it.
"""

from __future__ import annotations

import base64
import json
import secrets
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from tests.mcp_support import McpProject, text_of
from tests.server_records import Records, local_or_remote, running, state_of
from tests.sshd import SSHServer

from . import figures

KEY = "opensesame-" + secrets.token_hex(8)
# A passphrase: a cut part of it does not look random, so only its place in a URL marks it.
PASSWORD = f"violet-harbor-{secrets.randbelow(9000) + 1000}-lantern-quietly-drifts-home"


def pieces(secret: str, n: int = 6) -> list[str]:
    """Every run of n characters of a secret: none may show, not even a cut part."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def leaks(text: str, *secret: str) -> list[str]:
    """The runs of each secret found in `text`; counted as one attack tried."""
    found = [p for s in secret for p in pieces(s) if p in text]
    figures.count("outputs_secret_tries")
    figures.count("outputs_secret_leaks", len(found))
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "root"
    made.mkdir()
    return made


@pytest.fixture
def keyed_server(root: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process that looks like SGLang started with an API key, working in the roots."""
    argv = [sys.executable, "-c", "import time; time.sleep(120)", "sglang.launch_server"]
    argv += ["--model-path", str(root), f"--api-key={KEY}", "--tp-size", "2"]
    with running(argv, cwd=root) as proc:
        yield proc


@pytest.fixture(params=["local", "remote"])
def host(request: pytest.FixtureRequest, root: Path) -> SandboxedHost:
    return local_or_remote(request, root)


def test_server_processes_hides_an_api_key_given_as_flag_equals_value(
    host: SandboxedHost, keyed_server: subprocess.Popen[bytes]
) -> None:
    ctx = ToolContext(hosts={host.name: host}, approver=deny_all)
    result = execute(ctx, "server_processes", {"host": host.name})
    assert result.ok, result.error
    [mine] = [p for p in result.data["processes"] if p["pid"] == keyed_server.pid]
    flags = {f["name"]: f["value"] for f in mine["flags"]}
    assert flags["--tp-size"] == "2" and flags["--api-key"].startswith("[REDACTED")
    assert leaks(json.dumps(result.data) + result.output, KEY) == []


def test_server_processes_hides_the_key_through_mcp_and_json(
    tmp_path: Path, sshd: SSHServer
) -> None:
    project = McpProject.create(tmp_path, sshd)
    argv = [sys.executable, "-c", "import time; time.sleep(120)", "sglang.launch_server"]
    argv += ["--model-path", str(project.root), f"--api-key={KEY}"]
    proc = subprocess.Popen(argv, cwd=project.root)
    said: list[str] = []

    async def session() -> None:
        async with project.client("stdio") as client:
            for name in ("local", "remote"):
                result = await client.call_tool("server_processes", {"host": name})
                said.append(text_of(result) + json.dumps(result.structured_content))

    try:
        anyio.run(session)
        cli = project.cli("tool", "server_processes", "--json")
    finally:
        proc.kill()
        proc.wait()
    assert len(said) == 2 and all(str(proc.pid) in s for s in said)
    assert cli.returncode == 0, cli.stderr
    assert str(proc.pid) in cli.stdout
    written = "".join(p.read_text() for p in project.transcripts.glob("*.jsonl"))
    assert leaks("".join(said) + cli.stdout + cli.stderr + written, KEY) == []


def test_server_status_redacts_a_command_before_cutting_it(host: SandboxedHost) -> None:
    """The status line cuts a command at 200 characters: here, 30 characters into a URL's
    password, whose `@host` redaction knows it by lies past the cut."""
    code = "import time; time.sleep(120)"
    url = f"--endpoint=http://alice:{PASSWORD}@127.0.0.1:1/"
    head = len(" ".join([sys.executable, "-c", code, ""])) + len("--endpoint=http://alice:")
    pad = "p" * (200 - 30 - head - 1)
    proc = subprocess.Popen([sys.executable, "-c", code, pad, url], start_new_session=True)
    try:
        with Records(state_of(host)) as records:
            server_id = records.write(1, 0, pid=proc.pid)
            ctx = ToolContext(hosts={host.name: host}, approver=deny_all)
            status = execute(ctx, "server_status", {"host": host.name, "server_id": server_id})
    finally:
        proc.kill()
        proc.wait()
    assert status.ok, status.error
    assert f"pid {proc.pid} (parent" in status.output and pad in status.output
    assert leaks(status.output + json.dumps(status.data), PASSWORD) == []


class Echoing(BaseHTTPRequestHandler):
    """A server that refuses every request and quotes its credentials back, past a long
    message, so that a 300-character cut goes through them."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        said = f"denied {'no ' * 77}Authorization: {self.headers.get('Authorization')}"
        body = json.dumps({"error": {"message": said, "path": self.path}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echoing() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echoing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("given", ["api key", "url password"])
def test_sleuth_bench_keeps_no_echoed_secret_and_writes_records_0600(
    tmp_path: Path, echoing: int, given: str
) -> None:
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    if given == "api key":
        url, extra, hidden = f"http://127.0.0.1:{echoing}", ["--api-key", KEY], [KEY]
    else:
        url, extra, hidden = f"http://alice:{PASSWORD}@127.0.0.1:{echoing}", [], [PASSWORD, basic]
    argv = [sys.executable, "-m", "sleuth.cli", "bench", url, "-m", "m", "-c", "1", "-n", "2"]
    argv += ["--warmup", "0", *extra, "--export", "aiperf", "profile.json"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=300)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "no request succeeded: HTTP 401" in done.stderr
    [records] = (tmp_path / "bench-results").glob("*.jsonl")
    assert "denied no no no" in records.read_text()
    kept = [done.stdout, done.stderr, records.read_text(), (tmp_path / "profile.json").read_text()]
    kept += [p.read_text() for p in (tmp_path / "transcripts").glob("*.jsonl")]
    kept += [p.read_text() for p in (tmp_path / "bench-results").glob("*.html")]
    assert leaks("".join(kept), *hidden) == []
    assert stat.S_IMODE(records.stat().st_mode) == 0o600
