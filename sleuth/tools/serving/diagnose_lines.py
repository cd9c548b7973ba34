"""Engine log lines as a reader sees them: the message without the prefixes in front of it.

The engines, their worker processes and whatever started them put their own prefixes before
a message: vLLM's logger (`ERROR 12-05 20:24:46 engine.py:366] `, `INFO 11-05 12:19:32
[core.py:708] `), vLLM V1's process names (`(EngineCore_DP0 pid=1) `, `(VllmWorkerProcess
pid=7) `, `(RayWorkerWrapper pid=5) `), torch's `[rank0]: `, SGLang's `[2025-01-01 12:00:00
TP0] `, uvicorn's `ERROR:    `, NCCL's `host:pid:tid [0] file.cc:72 NCCL WARN `, glog's
`E0909 07:11:16.569 1405 api.py:833] `, Python's logging and `python -m`'s own
`/usr/bin/python3: `, a cloud log's `ERROR 2025-04-05T00:01:19.2Z `, and Xinference's
`[address=..., pid=...] `. `message` strips all of them; `split_lines` renders `\\r\\n`, bare
`\\r` (progress bars) and ANSI colour as a terminal does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

# ANSI colour, also as pasted copies show it once the escape byte became the text "ESC".
_ANSI = re.compile(r"(?:\x1b|ESC)\[[0-9;?]*[A-Za-z]")
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
# One prefix each; `message` strips them repeatedly from the start of the line.
_PREFIXES = (
    r"[A-Z][a-z]{2} [ \d]\d [\d:]{8} \S+ [\w.\-/@]+\[\d+\]:",  # journald / syslog
    r"\d{4}-\d\d-\d\dT[\d:.]+[+\-]\d{4} \S+ [\w.\-/@]+\[\d+\]:",  # journalctl -o short-iso
    r"[\w.\-]+ +\|",  # docker compose service column
    r"> ?",  # a quoted paste
    r"\*\*",  # Markdown bold around a pasted line
    r"\(?[\w.\-]+ pid=\d+(?:, ip=[\w.:]+)?\)",  # (EngineCore_DP0 pid=1), (RayWorkerWrapper pid=5)
    r"\(pid=\d+(?:, ip=[\w.:]+)?\)",
    r"\[rank\d+\]:",
    r"\[\d{4}-\d\d-\d\d[ T][\d:.,]+Z?(?: (?:[A-Z]+\d+|[\w-]+))*\]",  # SGLang [.. TP0], [..]
    _LEVEL + r" \d\d-\d\d [\d:.]+ (?:\[[\w.\-/]+:\d+\]|[\w.\-/]+:\d+\])",  # vLLM logger
    _LEVEL + r" \d{4}-\d\d-\d\d[ T][\d:.,]+Z?(?: [\w.\-]+:\d+\])?",  # NIM, cloud log lines
    r"\d{4}-\d\d-\d\d [\d:,.]+ (?:[\w.\-]+ )?(?:\d+ )?" + _LEVEL + r"(?: [\w.\-]+:\d+ --)?",
    r"\d{4}-\d\d-\d\d [\d:,.]+ - [\w.\-]+ - " + _LEVEL + " -",  # Python logging, " - " style
    r"[WEIF]\d{4} [\d:.]+ +\d+ [\w./\-]+:\d+\]",  # glog (torch elastic)
    r"\[[WEIF]\d{3,4} [\d:.]+ [\w.\-]+:\d+\]",  # c10 warnings after [rank0]:
    r"\[ERROR\] \d{4}-[\d\-:]+ \(PID:\d+[^)]*\) \w+",  # Ascend runtime
    r"\S+:\d+:\d+ \[\d+\] (?:[\w/.\-]+:\d+ )?NCCL (?:WARN|INFO)",
    _LEVEL + r":",  # uvicorn
    r"(?:/\S*/)?python[\d.]*:(?= )",  # `python -m` reporting on its own
)
_PREFIX = re.compile(r"^(?:\s*(?:" + "|".join(_PREFIXES) + r"))+\s*")
_QUIET = re.compile(r"\b(?:DEBUG|INFO|WARNING|WARN)\b|^\s*[WI]\d{4} ")
_LOUD = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|^\s*[EF]\d{4} ")
# Xinference puts its actor's address between an exception's name and its message.
_WRAPPED_BY = re.compile(r"^(?:[\w.]+: )?\[address=[^\]]*, pid=\d+\] ")
EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Failed"
    r"|OutOfResources)(?::\s*(?P<text>.*))?$"
)
_VALUE_ERROR = re.compile(r"^(?:Value|Assertion) error, (?P<text>.*?)(?: \[type=\w+.*)?$")
FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w<>.]+)')
# Lines that only point at a cause elsewhere in the log.
WRAPPERS = (
    "Engine core initialization failed",
    "See root cause above",
    "See stack trace for the root cause",
    "validation error for",
    "Engine process failed to start",
    "Initialization failed",
    "EngineCore failed to start",
    "WorkerProc failed to start",
    "Error raised in subprocess",
    "Exception in ASGI application",
    "scheduler is dead",
    "Received sigquit from a child process",
)

Rank = Literal[0, 1, 2, 3]
HEADLINE_CHARS = 2000
"""Long enough for a whole line with the engine's list of supported architectures."""


@dataclass(frozen=True)
class Line:
    """One log line: as logged (`raw`), its message, and how strongly it reads as an error."""

    index: int
    raw: str
    prefix: str
    msg: str

    @cached_property
    def is_exception(self) -> bool:
        return EXCEPTION.match(self.msg) is not None or _VALUE_ERROR.match(self.msg) is not None

    @cached_property
    def rank(self) -> Rank:
        """3 an exception line, 2 logged at ERROR, 1 unmarked, 0 logged at INFO or WARNING."""
        if self.is_exception:
            return 3
        if _LOUD.search(self.prefix):
            return 2
        return 0 if _QUIET.search(self.prefix) else 1

    @property
    def is_wrapper(self) -> bool:
        """An exception that names no cause itself: a pointer elsewhere, or an empty message."""
        found = EXCEPTION.match(self.msg)
        text = (found.group("text") or "") if found else self.msg
        return any(w in self.msg for w in WRAPPERS) or not text.strip() or text.endswith(":")


def split_lines(text: str) -> list[str]:
    """Log text as a terminal shows it: `\\r\\n` ends a line; a lone `\\r` redraws it, so only
    what follows the last one stays (progress bars); ANSI colour codes are not text."""
    lines = _ANSI.sub("", text).replace("\r\n", "\n").split("\n")
    return [line.rpartition("\r")[2] for line in lines]


def message(line: str) -> str:
    """A log line without the prefixes of the engine, its workers and its launcher."""
    found = _PREFIX.match(line)
    return _tail(line, found.end() if found else 0)


def _tail(line: str, start: int) -> str:
    text = line[start:].strip()
    return text[:-2].rstrip() if text.endswith("**") else text


def parse(lines: list[str]) -> list[Line]:
    """The non-blank lines of a log, each with its prefixes and its message."""
    out = []
    for i, raw in enumerate(lines):
        if raw.strip():
            found = _PREFIX.match(raw)
            end = found.end() if found else 0
            out.append(Line(i, raw.rstrip(), raw[:end], _tail(raw, end)))
    return out


def headline(line: Line, before: list[Line]) -> tuple[str, Line]:
    """The cause as a reader wants it, and the line it is read from: pydantic's `Value error,
    X` is X; Xinference's wrapper goes; a bare `AssertionError` is the `assert` statement
    Python printed above it."""
    msg = line.msg
    value = _VALUE_ERROR.match(msg)
    if value:
        return value.group("text")[:HEADLINE_CHARS], line
    msg = _WRAPPED_BY.sub("", msg)
    if msg == "AssertionError":
        for prior in reversed(before[-3:]):
            if prior.msg.startswith("assert "):
                return prior.msg[:HEADLINE_CHARS], prior
    return msg[:HEADLINE_CHARS], line


def frames(lines: list[Line]) -> list[tuple[str, str]]:
    """(path, function) of the traceback frames among these lines."""
    found = (FRAME.search(line.msg) for line in lines)
    return [(m.group("path"), m.group("func")) for m in found if m]
