"""Calls to `server_ctl.py`, the program that does the serving work on the host.

The program is sent over the connection and answers each command with one JSON object;
`ctl(host, command, arg, Answer)` runs it and returns that answer as a typed model. It
starts a server detached in its own process group with its log in the login user's own
state folder on the host (`$XDG_STATE_HOME/sleuth/servers/<server_id>/`, else
`~/.local/state/...`), probes its health on the host's loopback, and stops the group. It reads
only records that no one but the login user could have written.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel

from sleuth.errors import ErrorKind
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.program_run import read_answer
from sleuth.tools.results import ToolError
from sleuth.transcripts.redact import clean_cut, redact

UNSAFE = "unsafe_record"
"""server_ctl's refusal kind for a record, or record folder, that others could write."""
SERVER_ID_PATTERN = r"^srv-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$"
ANSWER_CAP = 4 << 20
"""The most bytes of one answer read from the host; a longer one is an error, never parsed."""


class CtlRefused(ToolError):
    """server_ctl declined a request; `failure` names a launch-failure kind when it is one."""

    def __init__(self, message: str, failure: str) -> None:
        # A record or record folder someone else could have written: the sandbox's refusal.
        super().__init__(message, ErrorKind.POLICY if failure == UNSAFE else None)
        self.failure = failure


class ReadySpec(BaseModel):
    """How a server shows it is ready: a URL on the host's loopback answering 200, a log
    line, or both."""

    url: str | None = None
    log_line: str | None = None


class ServerRecord(BaseModel):
    """A server's record.json on the host (the fields Sleuth reads)."""

    id: str
    engine: str
    pid: int
    pgid: int
    port: int
    ready: ReadySpec
    started_at: float
    log: str
    stopped_at: float | None = None


class HttpAnswer(BaseModel):
    """One GET on the host's loopback: a status and body, or the error that prevented it."""

    status: int | None = None
    body: str = ""
    error: str | None = None


class LogHit(BaseModel):
    key: str
    phrase: str
    line: str


class Started(BaseModel):
    record: ServerRecord


class Probe(BaseModel):
    """One readiness poll: the process, the new log lines that matched, the health check."""

    alive: bool
    exit_code: int | None
    now: float
    started_at: float
    scan_to: int
    hits: list[LogHit]
    tail: str
    http: HttpAnswer | None = None


class ServerProcess(BaseModel):
    """A live process of a server: its group, its session or a descendant of its first."""

    pid: int
    ppid: int | None = None
    cmd: str = ""


class Status(BaseModel):
    record: ServerRecord
    alive: bool
    exit_code: int | None
    processes: list[ServerProcess]
    now: float
    ended_at: float | None
    fetched: dict[str, HttpAnswer]
    tail: str


class Stopped(BaseModel):
    record: ServerRecord
    was_running: list[int]
    """The server's live processes when the stop began (empty: nothing was running)."""
    signals: list[str]
    remaining: list[int]
    waited_s: float


class Listed(BaseModel):
    record: ServerRecord
    alive: bool
    exit_code: int | None
    ended_at: float | None


class IgnoredRecord(BaseModel):
    """A record server_ctl would not read, and why (someone else could have written it)."""

    id: str
    why: str


class Listing(BaseModel):
    """Every live server and the newest ended ones; `older` ended records are not in it."""

    servers: list[Listed]
    now: float
    older: int = 0
    folder: str = ""
    """The state folder the records are in, on the host."""
    ignored: list[IgnoredRecord] = []


class LogText(BaseModel):
    text: str
    cut: bool
    """The log is longer than `text`: only its end was read."""


Answer = TypeVar("Answer", bound=BaseModel)


def ctl(
    host: SandboxedHost,
    command: str,
    arg: dict[str, Any],
    answer: type[Answer],
    timeout: float = 30.0,
) -> Answer:
    """Run one server_ctl command on the host and return its JSON answer as `answer`."""
    # The argument (a launch's env among it) travels on stdin, never on the command line.
    result = host.run_program(
        "server_ctl.py",
        [command],
        secrets=arg,
        timeout=timeout,
        max_bytes=ANSWER_CAP,
        retry=command not in ("start", "stop"),  # never start or stop a server twice
    )
    if result.timed_out:
        raise ToolError(
            f"server control ({command}) timed out after {timeout:.0f} s on host {host.name!r}"
        )
    lines = result.stdout.decode(errors="replace").strip().splitlines()
    if result.exit_code != 0 or not lines:
        err = result.stderr.decode(errors="replace").strip()[-2000:]
        raise ToolError(
            f"server control ({command}) failed on host {host.name!r} with exit code "
            f"{result.exit_code}: {err or '(no output)'}. It needs {host.config.python!r} on "
            f"the host; set `python` under [hosts.{host.name}] if it lives elsewhere"
        )
    where = f"server control ({command}) on host {host.name!r}"
    if result.stdout_cut:
        raise ToolError(
            f"the answer of {where} passed {ANSWER_CAP:,} bytes and was cut "
            f"({result.stdout_cut:,} bytes more were dropped), so it cannot be read"
        )
    try:
        out = json.loads(lines[-1])
    except ValueError:
        out = None
    if not isinstance(out, dict):
        said = redact(lines[-1])  # before the cut: a secret cut short is no longer found
        said = said if len(said) <= 200 else clean_cut(said[:200]) + "..."
        raise ToolError(f"{where} answered with a line that is not a JSON object: {said!r}")
    if "error" in out:
        raise CtlRefused(str(out["error"]), str(out.get("kind", "other")))
    return read_answer(host.name, f"server_ctl.py ({command})", out, answer)
