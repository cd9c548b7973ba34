"""Who signed a transcript, and how much of it: its `signature` events and its `.sig` file.

```python
found = check_signatures(path, raws, allowed)     # raws: the events as parsed dicts
found.problems     # [(line, why)]: a signature that fails, a head that was rewritten...
found.covered      # events that a valid signature vouches for
found.gap          # why the transcript is integrity only (None when fully signed and checked)
```

A signature over head N holds events 0..N fixed through the hash chain, but it vouches only
for the events its own run appended: a run (the first, or one `sleuth resume` picked up at a
`session_started` with `resumed_from`) signs from its own start to N. So a resumed run's key
never vouches for events it did not see made; those need their own run's signatures. A
`signature` event right after its head covers itself too (it carries nothing but the
signature). The `.sig` file signs the last event, session_ended, of a finished run; one that
signs anything else means the file changed after it was signed. A run that died has no
`.sig`: its latest signature is its last `signature` event.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sleuth.transcripts.allowed_signers import AllowedSigners
from sleuth.transcripts.safe_files import read_file
from sleuth.transcripts.seal import SIGNING, detached_path
from sleuth.transcripts.sign import (
    NAMESPACE,
    SignatureError,
    SshSignature,
    check,
    head_bytes,
    parse,
)
from sleuth.transcripts.store import Head


class SignerReport(BaseModel):
    """One key that signed one run of the transcript (a resumed run is a run of its own)."""

    fingerprint: str
    key_type: str
    principals: list[str]
    """The allowed_signers principals that accept this key; empty when not checked."""
    covers: int
    """One past the last event this key's latest valid signature in this run vouches for."""
    where: str
    """`line N` for a signature event, or the `.sig` file."""
    first: int = 0
    """The first event it vouches for: where the run that appended and signed them began."""


@dataclass
class _Valid:
    signature: SshSignature
    first: int
    covers: int
    where: str
    line: int


@dataclass
class SignatureFindings:
    problems: list[tuple[int, str]] = field(default_factory=list)
    signers: list[SignerReport] = field(default_factory=list)
    covered: int = 0
    """Events that a valid signature vouches for."""
    detached: str | None = None
    gap: str | None = None
    head: Head | None = None
    """The newest head a valid signature covers: what `--export-head` writes."""
    head_signature: str | None = None
    """That head's armored signature (the `.sig` file's, or a `signature` event's)."""


def check_signatures(
    path: Path, raws: list[dict[str, Any]], allowed: AllowedSigners | None
) -> SignatureFindings:
    """Check every signature of a transcript whose chain already verified."""
    found = SignatureFindings()
    session_id = str(raws[0].get("session_id", ""))
    hashes = [str(raw.get("hash", "")) for raw in raws]
    last = Head(session_id, len(raws) - 1, hashes[-1])
    starts = run_starts(raws)
    valid = _in_file(raws, session_id, hashes, starts, found)
    if valid:
        newest = raws[valid[-1].line - 1]
        found.head = Head(session_id, int(newest["head_seq"]), str(newest["head_hash"]))
        found.head_signature = str(newest["sshsig"])
    detached = _detached(detached_path(path), raws, last, starts[-1], found)
    if detached is not None:
        valid.append(detached)
    vouched = [False] * len(raws)
    for v in valid:
        vouched[v.first : v.covers] = [True] * (v.covers - v.first)
    found.covered = sum(vouched)
    _signers(valid, allowed, found)
    if not found.problems:
        found.gap = _gap(raws, valid, allowed, found, vouched)
    return found


def run_starts(raws: list[dict[str, Any]]) -> list[int]:
    """Where each run begins: event 0, and each `session_started` of a resumed run."""
    return [0] + [i for i, raw in enumerate(raws) if i > 0 and raw.get("type") == "session_started"]


def _run_start(starts: list[int], index: int) -> int:
    return max(s for s in starts if s <= index)


def _in_file(
    raws: list[dict[str, Any]],
    session_id: str,
    hashes: list[str],
    starts: list[int],
    found: SignatureFindings,
) -> list[_Valid]:
    valid = []
    for index, raw in enumerate(raws):
        if raw.get("type") != "signature":
            continue
        line, head_seq, head_hash = index + 1, raw.get("head_seq"), raw.get("head_hash")
        if not isinstance(head_seq, int) or not 0 <= head_seq < index:
            found.problems.append((line, f"the signature names head {head_seq!r}, not an event"))
            continue
        if hashes[head_seq] != head_hash:
            found.problems.append(
                (
                    line,
                    f"the signature is over event {head_seq} with hash {str(head_hash)[:16]}…, "
                    f"but that event's hash is {hashes[head_seq][:16]}…: the events up to it "
                    "were rewritten after they were signed",
                )
            )
            continue
        try:
            signature = parse(str(raw.get("sshsig", "")))
            check(signature, head_bytes(session_id, head_seq, str(head_hash)))
        except SignatureError as exc:
            found.problems.append((line, f"the signature does not verify: {exc}"))
            continue
        if raw.get("signer") != signature.fingerprint:
            found.problems.append(
                (
                    line,
                    f"the event names signer {raw.get('signer')!r}, but its signature is "
                    f"by {signature.fingerprint}",
                )
            )
            continue
        first = _run_start(starts, index)
        if head_seq < first:
            found.problems.append(
                (
                    line,
                    f"the signature is over event {head_seq}, before the run that holds it "
                    f"began (event {first}): a run signs only the events it appended",
                )
            )
            continue
        # A signature event right after its head covers itself: it adds nothing else.
        covers = index + 1 if head_seq == index - 1 else head_seq + 1
        valid.append(_Valid(signature, first, covers, f"line {line}", line))
    return valid


def _detached(
    sig_file: Path, raws: list[dict[str, Any]], last: Head, first: int, found: SignatureFindings
) -> _Valid | None:
    line = len(raws)
    try:
        data = read_file(sig_file)
    except FileNotFoundError:
        return None
    except OSError as exc:
        found.detached = str(sig_file)
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or exc
        found.problems.append((line, f"{sig_file} cannot be read: {why}"))
        return None
    found.detached = str(sig_file)
    try:
        text = data.decode("ascii")
        signature = parse(text)
        check(signature, head_bytes(last.session_id, last.seq, last.hash))
    except UnicodeDecodeError as exc:
        found.problems.append((line, f"{sig_file} cannot be read: {exc}"))
        return None
    except SignatureError as exc:
        found.problems.append(
            (
                line,
                f"{sig_file} does not sign this transcript's last event (seq {last.seq}): "
                f"{exc}. The transcript was changed after it was signed (events cut off, "
                "replaced or added), or the signature belongs to another transcript",
            )
        )
        return None
    found.head, found.head_signature = last, text
    return _Valid(signature, first, last.seq + 1, str(sig_file), line)


def _signers(valid: list[_Valid], allowed: AllowedSigners | None, found: SignatureFindings) -> None:
    by_key: dict[tuple[bytes, int], SignerReport] = {}
    for v in valid:
        sig = v.signature
        report = by_key.get((sig.public_blob, v.first))
        if report is None:
            principals = allowed.principals_for(sig.public_blob, NAMESPACE) if allowed else []
            known = any(blob == sig.public_blob for blob, _ in by_key)
            if allowed is not None and not principals and not known:
                found.problems.append(
                    (
                        v.line,
                        f"the {sig.key_type} key {sig.fingerprint} that signed ({v.where}) is not "
                        f"in {allowed.path} for namespace {NAMESPACE}: an unknown signer",
                    )
                )
            report = SignerReport(
                fingerprint=sig.fingerprint,
                key_type=sig.key_type,
                principals=principals,
                covers=v.covers,
                where=v.where,
                first=v.first,
            )
            by_key[(sig.public_blob, v.first)] = report
        elif v.covers >= report.covers:
            report.covers, report.where = v.covers, v.where
    found.signers = list(by_key.values())


def _gap(
    raws: list[dict[str, Any]],
    valid: list[_Valid],
    allowed: AllowedSigners | None,
    found: SignatureFindings,
    vouched: list[bool],
) -> str | None:
    """Why a transcript whose signatures all hold is still integrity only, or None."""
    if not valid:
        return "not signed"
    reasons = []
    for first, last in _holes(vouched):
        span = raws[first : last + 1]
        stopped = next(
            (r for r in span if r.get("type") == "error" and r.get("where") == SIGNING), None
        )
        after = raws[last + 1] if last + 1 < len(raws) else {}
        if after.get("prefix_unchecked"):
            reasons.append(
                f"events {first}-{last} are not signed: `sleuth resume --trust-unsigned` went "
                f"on from them at event {last + 1} ({after['prefix_unchecked']})"
            )
        elif stopped is not None:
            reasons.append(f"events {first}-{last} are not signed: {stopped.get('message')}")
        elif last == len(raws) - 1 and any(r.get("type") == "session_ended" for r in raws):
            found.problems.append(
                (
                    first + 1,
                    f"the session ended, but its end is not signed: events {first}-{last} are "
                    f"covered by no signature ({found.detached or 'no .sig file'} does not "
                    "sign the end); they were replaced or added after signing, or the .sig "
                    "file was removed",
                )
            )
            return None
        else:
            reasons.append(
                f"events {first}-{last} are not signed: the run that appended them stopped "
                "before signing them, or they were added"
            )
    if reasons:
        return "; ".join(reasons)
    if allowed is None:
        return (
            "the signer is not checked: no allowed signers (pass --allowed-signers FILE, or "
            "set [sign] allowed_signers in sleuth.toml)"
        )
    return None


def _holes(vouched: list[bool]) -> list[tuple[int, int]]:
    """The runs of events no signature vouches for, as (first, last)."""
    holes: list[tuple[int, int]] = []
    for index, ok in enumerate(vouched):
        if ok:
            continue
        if holes and holes[-1][1] == index - 1:
            holes[-1] = (holes[-1][0], index)
        else:
            holes.append((index, index))
    return holes
