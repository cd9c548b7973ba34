"""Check a transcript as an audit trail: every line's schema, sequence and hash chain.

    report = verify(Path("transcripts/20261129T093012Z-ab12.jsonl"))
    if not report.ok:
        for problem in report.problems:
            print(problem.line, problem.kind, problem.message)

An edited event fails its own hash; a removed or reordered event breaks the
sequence and the chain at the line where it happened. A torn last line (a
crash mid-write) is not tampering: it is reported in `torn_tail` and the
prefix before it can still verify.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from sleuth.transcripts.events import KNOWN_SCHEMA_VERSIONS, parse_event
from sleuth.transcripts.store import (
    LoadedTranscript,
    TranscriptError,
    event_hash,
    load_data,
    split_lines,
)

ProblemKind = Literal["json", "schema", "seq", "chain", "hash", "start"]


class Problem(BaseModel):
    line: int
    """1-based line number in the file."""
    kind: ProblemKind
    message: str


OUTPUT_SCHEMA_VERSION = 1
"""Version of the `--json` outputs' shape (`sleuth schema NAME`); bumped on a breaking change."""


class VerifyReport(BaseModel):
    """`sleuth verify --json`: whether a transcript is an untampered audit trail."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str
    """The file checked."""
    ok: bool
    events: int
    """Complete lines checked (the torn tail, if any, is not counted)."""
    problems: list[Problem]
    torn_tail: str | None = None
    """Set when the last line was cut off: a warning, not tampering."""
    ended: bool = False
    """The last event is session_ended. A chain cannot tell events cut off the end from a
    session that stopped early, so a missing end is worth a look."""


class _Chain:
    """What the next line must carry, taken from the line before it as recorded."""

    def __init__(self) -> None:
        self.seq = 0
        self.prev: str | None = ""
        """None after an unreadable line: its hash is unknown, so the next link is not judged."""

    def skip(self) -> None:
        self.seq += 1
        self.prev = None

    def check(self, number: int, raw: dict[str, Any]) -> list[Problem]:
        problems = []
        seq, prev = raw.get("seq"), raw.get("prev")
        if seq != self.seq:
            problems.append(
                Problem(
                    line=number,
                    kind="seq",
                    message=f"seq is {seq!r}, expected {self.seq}: an event before this one"
                    " was removed, or events were reordered",
                )
            )
        if self.prev is not None and prev != self.prev:
            problems.append(
                Problem(
                    line=number,
                    kind="chain",
                    message="prev does not match the hash of the line before it:"
                    " an event was removed, inserted or reordered here",
                )
            )
        if raw.get("hash") != event_hash(raw):
            problems.append(
                Problem(
                    line=number,
                    kind="hash",
                    message="hash does not match the event's content: this line was edited",
                )
            )
        self.seq = seq + 1 if isinstance(seq, int) else self.seq + 1
        recorded = raw.get("hash")
        self.prev = recorded if isinstance(recorded, str) else ""
        return problems


def _start_problem(raw: dict[str, Any]) -> Problem | None:
    """The first line decides whether this is a transcript at all."""
    if raw.get("type") != "session_started":
        return Problem(
            line=1,
            kind="start",
            message=f"the first event is {raw.get('type')!r}, not session_started: this is not "
            "a Sleuth transcript, or its start was removed",
        )
    version = raw.get("schema_version")
    if version not in KNOWN_SCHEMA_VERSIONS:
        known = ", ".join(map(str, sorted(KNOWN_SCHEMA_VERSIONS)))
        return Problem(
            line=1,
            kind="start",
            message=f"schema_version {version!r} is not one this release reads ({known}); "
            "use the Sleuth release that wrote it",
        )
    return None


def _schema_problem(number: int, raw: dict[str, Any]) -> Problem | None:
    if number == 1 and (start := _start_problem(raw)):
        return start
    try:
        parse_event(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return Problem(
            line=number,
            kind="schema",
            message=f"not a valid event: {where}: {first['msg']} ({exc.error_count()} errors)",
        )
    return None


def _check_line(number: int, line: bytes, chain: _Chain) -> list[Problem]:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        chain.skip()
        what = "is not a Sleuth transcript" if number == 1 else "was corrupted or edited"
        message = f"not JSON ({exc}), though the line is complete: the file {what}"
        return [Problem(line=number, kind="json", message=message)]
    if not isinstance(raw, dict):
        chain.skip()
        return [Problem(line=number, kind="json", message="not a JSON object")]
    schema = _schema_problem(number, raw)
    return ([schema] if schema else []) + chain.check(number, raw)


def _ends_session(lines: list[bytes]) -> bool:
    try:
        last = json.loads(lines[-1]) if lines else None
    except ValueError:
        return False
    return isinstance(last, dict) and last.get("type") == "session_ended"


def verify(path: Path) -> VerifyReport:
    """Check every complete line of the transcript at `path`; never raises for bad content.

    Raises TranscriptError only when the file cannot be read.
    """
    path = Path(path)
    return _verify_data(path, _read(path))


def load_verified(path: Path) -> tuple[VerifyReport, LoadedTranscript | None]:
    """One read of the file for both: its verification, and its events when it verifies
    (None when it does not: an edited trail is not to be read as if it were the record)."""
    path = Path(path)
    data = _read(path)
    report = _verify_data(path, data)
    return report, (load_data(path, data) if report.ok else None)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc


def _verify_data(path: Path, data: bytes) -> VerifyReport:
    raw = split_lines(data)
    chain = _Chain()
    problems: list[Problem] = []
    for number, line in enumerate(raw.lines, start=1):
        problems += _check_line(number, line, chain)
    torn = None
    if raw.torn_tail is not None:
        torn = (
            f"line {len(raw.lines) + 1} is incomplete ({len(raw.torn_tail)} bytes):"
            " the writer stopped mid-event (a crash, kill or full disk); the lines before it"
            " are checked and the torn line is ignored"
        )
    if not raw.lines:
        message = (
            "the transcript is empty"
            if raw.torn_tail is None
            else (
                "the file holds no complete line: it is not a transcript, or its writer stopped"
                " before the first event was whole"
            )
        )
        problems.append(Problem(line=1, kind="start", message=message))
    return VerifyReport(
        transcript=str(path),
        ok=not problems,
        events=len(raw.lines),
        problems=problems,
        torn_tail=torn,
        ended=_ends_session(raw.lines),
    )


def not_verified(report: VerifyReport) -> str | None:
    """The banner a reader puts above a transcript that failed verification, or None."""
    if report.ok:
        return None
    first = report.problems[0]
    return (
        f"NOT VERIFIED: line {first.line} ({first.kind}): {first.message}. What follows may "
        f"not be what was recorded; see `sleuth verify {report.transcript}`."
    )
