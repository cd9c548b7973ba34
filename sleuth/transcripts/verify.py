"""Check a transcript as an audit trail: schema, sequence, hash chain, end, signatures, ledger.

    report = verify(Path("transcripts/20261129T093012Z-ab12.jsonl"), allowed_signers=signers)
    report.verdict        # "signed", "signed_prefix", "integrity_only" or "failed"
    report.headline       # the one line every reader (show, replay, resume, MCP) puts first
    for problem in report.problems:
        print(problem.line, problem.kind, problem.message)

An edited event fails its own hash; a removed or reordered event breaks the
sequence and the chain at the line where it happened. Anything after
session_ended was added later. A torn last line (a crash mid-write) is not
tampering: it is reported in `torn_tail` and the prefix before it can still
verify. An unkeyed chain can be recomputed by whoever rewrites the file, so an
intact chain alone is `integrity_only`; `signed` needs every event covered by
a signature from a key in the allowed signers, each event vouched for by the run that
appended it, and the session's end; every event signed by a run that did not end is
`signed_prefix` ("signed through event N; the run did not end here"). The ledger, when there
is one, must hold exactly one entry for the session, with the same final head. Every reader
takes this one verdict (`verify`, or `load_verified` for one read of the file) and puts its
`headline` first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from sleuth.transcripts.allowed_signers import AllowedSigners, read_allowed_signers
from sleuth.transcripts.events import KNOWN_SCHEMA_VERSIONS, parse_event
from sleuth.transcripts.ledger import LedgerCheck, check_ledger, ledger_path
from sleuth.transcripts.signatures import SignerReport, check_signatures
from sleuth.transcripts.store import (
    Head,
    LoadedTranscript,
    event_hash,
    load_data,
    read_transcript,
    split_lines,
)

ProblemKind = Literal[
    "json", "schema", "seq", "chain", "hash", "start", "after_end", "signature", "ledger"
]
Verdict = Literal["signed", "signed_prefix", "integrity_only", "failed"]


class Problem(BaseModel):
    line: int
    """1-based line number in the file."""
    kind: ProblemKind
    message: str


OUTPUT_SCHEMA_VERSION = 1
"""Version of the `--json` outputs' shape (`sleuth schema NAME`); bumped on a breaking change."""


class VerifyReport(BaseModel):
    """`sleuth verify --json`: whether a transcript is an untampered audit trail, and who
    signed it."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str
    """The file checked."""
    ok: bool
    """No problem found: nothing edited, removed, added after the end, or falsely signed."""
    verdict: Verdict = "failed"
    """signed (exit 0): a session that ended, every event covered by a signature from an
    allowed signer; signed_prefix (exit 3): the same, but the run did not end (it died, or
    its end was cut off); integrity_only (exit 3): intact, but nothing proves who wrote it
    (`integrity_only` says why); failed (exit 1): see `problems`."""
    headline: str = ""
    """The verdict in one line, as `sleuth verify` prints it and every reader shows it first."""
    integrity_only: str | None = None
    """Why an intact transcript is not `signed`: "not signed", a signer not checked, events
    after the last signature."""
    events: int
    """Complete lines checked (the torn tail, if any, is not counted)."""
    problems: list[Problem]
    torn_tail: str | None = None
    """Set when the last line was cut off (torn: the run died): a warning, not tampering."""
    ended: bool = False
    """The transcript holds session_ended. A chain cannot tell events cut off the end from a
    session that stopped early, so a missing end is worth a look."""
    signers: list[SignerReport] = Field(default_factory=list)
    signed_events: int = 0
    """Events that a valid signature vouches for (a run's signatures vouch only for the
    events that run appended: `signers` says which)."""
    signature_file: str | None = None
    """The detached `.sig` beside the transcript, when there is one."""
    ledger: LedgerCheck | None = None
    """The transcript against the local ledger; None when no ledger was consulted."""


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


def _check_line(
    number: int, line: bytes, chain: _Chain
) -> tuple[dict[str, Any] | None, list[Problem]]:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        chain.skip()
        what = "is not a Sleuth transcript" if number == 1 else "was corrupted or edited"
        message = f"not JSON ({exc}), though the line is complete: the file {what}"
        return None, [Problem(line=number, kind="json", message=message)]
    if not isinstance(raw, dict):
        chain.skip()
        return None, [Problem(line=number, kind="json", message="not a JSON object")]
    schema = _schema_problem(number, raw)
    return raw, ([schema] if schema else []) + chain.check(number, raw)


def _after_end(raws: list[dict[str, Any] | None], torn: bool) -> list[Problem]:
    """Anything after session_ended was added later: a session records nothing after its end."""
    end = next((i for i, r in enumerate(raws) if r and r.get("type") == "session_ended"), None)
    if end is None or (end == len(raws) - 1 and not torn):
        return []
    extra = len(raws) - end - 1
    what = f"{extra} more line{'s' if extra != 1 else ''}" if extra else "a torn line"
    return [
        Problem(
            line=end + 2,
            kind="after_end",
            message=f"{what} after session_ended (line {end + 1}): a session records nothing "
            "after its end, so this was added later",
        )
    ]


@dataclass(frozen=True)
class Anchors:
    """What a verdict is checked against beyond the file: who may sign, and the ledger."""

    allowed_signers: AllowedSigners | None = None
    ledger: Path | None = None


def anchors(allowed_signers: str | None, ledger: str | None) -> Anchors:
    """The anchors as configured (`[sign] allowed_signers`, `[ledger] path`), the ledger's
    default place when none is set. Raises AllowedSignersError for a file that cannot be read."""
    signers = read_allowed_signers(Path(allowed_signers).expanduser()) if allowed_signers else None
    return Anchors(signers, ledger_path(ledger))


def verify(
    path: Path,
    *,
    allowed_signers: AllowedSigners | None = None,
    ledger: Path | None = None,
) -> VerifyReport:
    """Check every complete line of the transcript at `path`, its signatures (against
    `allowed_signers` when given) and, when `ledger` exists, its ledger entry; never raises
    for bad content.

    Raises TranscriptError only when the file cannot be read.
    """
    path = Path(path)
    return _verify_data(path, _read(path), allowed_signers, ledger)


def verify_bytes(path: Path, data: bytes, against: Anchors | None = None) -> VerifyReport:
    """`verify` of bytes already read from `path`, so a reader shows exactly what was
    judged (a second read could find the file swapped)."""
    against = against or Anchors()
    return _verify_data(Path(path), data, against.allowed_signers, against.ledger)


def load_verified(
    path: Path, against: Anchors | None = None
) -> tuple[VerifyReport, LoadedTranscript | None]:
    """One read of the file for both: its verdict (the same as `verify`'s with the same
    anchors), and its events when it did not fail (None when it did: an edited trail is not
    to be read as if it were the record)."""
    path = Path(path)
    data = _read(path)
    report = verify_bytes(path, data, against)
    return report, (load_data(path, data) if report.ok else None)


def signed_head(path: Path) -> tuple[Head, str] | None:
    """The newest head a signature covers, and that signature (armored): what an auditor
    hands `ssh-keygen -Y verify`. None when the chain does not hold or nothing is signed."""
    path = Path(path)
    raws = _raws(path, _read(path))
    if raws is None:
        return None
    found = check_signatures(path, raws, None)
    if found.head is None or found.head_signature is None:
        return None
    return found.head, found.head_signature


def _read(path: Path) -> bytes:
    return read_transcript(path)


def _raws(path: Path, data: bytes) -> list[dict[str, Any]] | None:
    """The complete lines as dicts, when every one of them checks."""
    chain = _Chain()
    raws = []
    for number, line in enumerate(split_lines(data).lines, start=1):
        raw, problems = _check_line(number, line, chain)
        if raw is None or problems:
            return None
        raws.append(raw)
    return raws or None


def _verify_data(
    path: Path,
    data: bytes,
    allowed: AllowedSigners | None = None,
    ledger: Path | None = None,
) -> VerifyReport:
    raw = split_lines(data)
    chain = _Chain()
    problems: list[Problem] = []
    raws: list[dict[str, Any] | None] = []
    for number, line in enumerate(raw.lines, start=1):
        parsed, found = _check_line(number, line, chain)
        raws.append(parsed)
        problems += found
    problems += _after_end(raws, raw.torn_tail is not None)
    torn = None
    if raw.torn_tail is not None:
        torn = (
            f"torn: the run died mid-event: line {len(raw.lines) + 1} is incomplete "
            f"({len(raw.torn_tail)} bytes; a crash, kill or full disk); the lines before it are "
            "checked and the torn line is ignored. `sleuth resume` cuts it off and records "
            "the repair"
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
    report = VerifyReport(
        transcript=str(path),
        ok=not problems,
        events=len(raw.lines),
        problems=problems,
        torn_tail=torn,
        ended=any(r and r.get("type") == "session_ended" for r in raws),
    )
    intact = [r for r in raws if r is not None]
    if not problems and intact:
        _add_signatures(report, path, intact, allowed)
        if ledger is not None:
            _add_ledger(report, ledger, intact, allowed)
    report.ok = not report.problems
    if report.ok:
        report.verdict = (
            "integrity_only"
            if report.integrity_only
            else ("signed" if report.ended else "signed_prefix")
        )
    report.headline = headline(report)
    return report


def _add_signatures(
    report: VerifyReport, path: Path, raws: list[dict[str, Any]], allowed: AllowedSigners | None
) -> None:
    found = check_signatures(path, raws, allowed)
    report.problems += [Problem(line=n, kind="signature", message=m) for n, m in found.problems]
    report.signers, report.signed_events = found.signers, found.covered
    report.signature_file, report.integrity_only = found.detached, found.gap


def _add_ledger(
    report: VerifyReport, ledger: Path, raws: list[dict[str, Any]], allowed: AllowedSigners | None
) -> None:
    hashes = [str(r.get("hash", "")) for r in raws]
    check = check_ledger(ledger, str(raws[0].get("session_id", "")), hashes, allowed)
    report.ledger = check
    if check is not None and check.state not in ("match", "not_in_ledger"):
        report.problems.append(Problem(line=len(raws), kind="ledger", message=check.message))


def not_verified(report: VerifyReport) -> str | None:
    """The banner a reader puts above a transcript that failed verification, or None."""
    if report.ok:
        return None
    first = report.problems[0]
    return (
        f"NOT VERIFIED: line {first.line} ({first.kind}): {first.message}. What follows may "
        f"not be what was recorded; see `sleuth verify {report.transcript}`."
    )


def headline(report: VerifyReport) -> str:
    """The verdict in one line: what `sleuth verify` says first, and every reader with it."""
    failed = not_verified(report)
    if failed is not None:
        return failed
    last = report.events - 1
    who = "; ".join(
        f"events {s.first}-{s.covers - 1} by {', '.join(s.principals) or s.fingerprint}"
        for s in report.signers
    )
    ledger = f"; ledger: {report.ledger.message}" if report.ledger is not None else ""
    if report.verdict == "signed":
        return f"SIGNED: {who}; the session ended, hash chain intact{ledger}."
    if report.verdict == "signed_prefix":
        return (
            f"SIGNED THROUGH EVENT {last}, NOT THE END: {who}; signed through event {last}; the "
            f"run did not end here (it died, or what came after was cut off){ledger}."
        )
    return (
        f"INTEGRITY ONLY: {report.integrity_only}. The hash chain holds, but nothing proves who "
        f"wrote {'the rest' if 0 < report.signed_events < report.events else 'it'}{ledger}."
    )
