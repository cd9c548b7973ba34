"""Sleuth's side of the host program's wire (`program/resident.py`): what is sent to start
it, the frames, the hello check, and what a failed answer means.

```python
bundle = Bundle.of(("checkpoint_probe", "secret_scan"))
channel.sendall(bundle.stdin)  # to `python3 -I -S -c BOOT serve` (BOOT: program/resident.py)
check_hello(first_frame_head, bundle, "gpu1")       # HostError naming both versions
```
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.program import program
from sleuth.hosts.program.resident import PROTOCOL, frame, read_frame

MODULES = ("checkpoint_probe", "secret_scan")
"""Sleuth's file-reading programs that the host program runs itself, beneath the roots."""


@dataclass(frozen=True)
class Answer:
    """One request's answer: its JSON header (`ok`, the result or `error`) and payload."""

    head: dict[str, Any]
    payload: bytes
    reconnected: bool = False


@dataclass(frozen=True)
class Bundle:
    """The program's source and the modules it may need, as sent on its stdin."""

    stdin: bytes
    sha256: str

    @staticmethod
    @cache
    def of(modules: tuple[str, ...]) -> Bundle:
        source = program("resident.py")
        codes = [program(name + ".py") for name in modules]
        payload = b"".join(codes)
        head = {"op": "modules", "names": list(modules), "sizes": [len(c) for c in codes]}
        stdin = b"%d\n" % len(source) + source + frame(head, payload)
        return Bundle(stdin, hashlib.sha256(source + payload).hexdigest())


class NoProgram(HostError):
    """The host cannot run Sleuth's program (no such interpreter, or it would not start), so
    its files are read with POSIX tools instead."""

    default_kind = ErrorKind.COMMAND_NOT_FOUND


class ProgramGone(HostError):
    """The program died (end of its output) or hung (no answer, not even to a ping): the
    request may be sent again to a fresh one."""

    default_kind = ErrorKind.HOST


class Refusal(Exception):
    """The program refused a path that is not beneath the roots: `how` is "outside" (as
    written) or "link" (a symlink on the way leads out)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class ProgramTimeout(Exception):
    """The request ran past its deadline on the host; the program is fine."""


def check_hello(head: dict[str, Any], bundle: Bundle, host: str) -> None:
    """The program's first frame must name the protocol and the source Sleuth sent."""
    if head.get("protocol") == PROTOCOL and head.get("sha256") == bundle.sha256:
        return
    raise HostError(
        f"Sleuth's program on host {host!r} answered with protocol {head.get('protocol')!r} "
        f"(source sha256 {str(head.get('sha256'))[:16]}), but this Sleuth speaks protocol "
        f"{PROTOCOL} (source sha256 {bundle.sha256[:16]}); refusing to use it. Both sides "
        "must be the same Sleuth version",
        ErrorKind.HOST,
    )


def failure(answer: Answer) -> Exception | None:
    """What a failed answer means here: a Refusal, an OSError with the host's errno, a
    ProgramTimeout, or a HostError for a bad request or a bug in the program."""
    if answer.head.get("ok"):
        return None
    error = answer.head.get("error") or {}
    kind = error.get("kind")
    if kind == "refused":
        return Refusal(str(error.get("how")))
    if kind == "os":
        return OSError(error.get("errno"), error.get("message") or "error")
    if kind == "timeout":
        return ProgramTimeout()
    return HostError(
        f"Sleuth's program on the host failed ({kind}): {error.get('message')}", ErrorKind.INTERNAL
    )


def frames(data: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """Every whole frame in `data`, in order."""
    at = 0

    def read(size: int) -> bytes:
        nonlocal at
        got = data[at : at + size]
        at += len(got)
        return got

    found = []
    while (got := read_frame(read)) is not None:
        found.append(got)
    return found


# The heads of the program's answers, one model per request: what Sleuth reads of an answer,
# validated before it is read (an answer of another shape is a HostError, never a KeyError).


class ResolveHead(BaseModel):
    real: str


class StatHead(BaseModel):
    mode: int | None
    size: int = 0
    mtime: float = 0.0


class ReadHead(BaseModel):
    pass


class LinesHead(BaseModel):
    sizes: list[int]
    total: int
    cut: int


class ListHead(BaseModel):
    entries: list[tuple[str, int, str]]
    cut: int
    denied: list[str]


class GrepHead(BaseModel):
    matches: list[tuple[str, int, str]]
    cut: int
    code: int | None


class LinesAtHead(BaseModel):
    lines: dict[int, str]
    cut: int


class RootHead(BaseModel):
    path: str
    mode: int | None
    real: str | None


class RootsHead(BaseModel):
    roots: list[RootHead]
