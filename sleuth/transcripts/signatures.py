"""Who signed a transcript, and how much of it: its `signature` events and its `.sig` file.

```python
found = check_signatures(path, raws, allowed)     # raws: the events as parsed dicts
found.problems     # [(line, why)]: a signature that fails, a head that was rewritten...
found.covered      # events, from the first, that a valid signature covers
found.gap          # why the transcript is integrity only (None when fully signed and checked)
```

A signature over head N covers events 0..N through the hash chain; a `signature` event right
after its head covers itself too (it carries nothing but the signature). The `.sig` file
signs the last event, session_ended, of a finished run; one that signs anything else means
the file changed after it was signed. A run that died has no `.sig`: its latest signature
is its last `signature` event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sleuth.transcripts.allowed_signers import AllowedSigners
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
    """One key that signed the transcript (a resumed run may add another)."""

    fingerprint: str
    key_type: str
    principals: list[str]
    """The allowed_signers principals that accept this key; empty when not checked."""
    covers: int
    """Events, from the first, that this key's latest valid signature covers."""
    where: str
    """`line N` for a signature event, or the `.sig` file."""


@dataclass
class _Valid:
    signature: SshSignature
    covers: int
    where: str
    line: int


@dataclass
class SignatureFindings:
    problems: list[tuple[int, str]] = field(default_factory=list)
    signers: list[SignerReport] = field(default_factory=list)
    covered: int = 0
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
    valid = _in_file(raws, session_id, hashes, found)
    if valid:
        newest = raws[valid[-1].line - 1]
        found.head = Head(session_id, int(newest["head_seq"]), str(newest["head_hash"]))
        found.head_signature = str(newest["sshsig"])
    sig_file = detached_path(path)
    if sig_file.is_file():
        found.detached = str(sig_file)
        detached = _detached(sig_file, raws, last, found)
        if detached is not None:
            valid.append(detached)
    found.covered = max((v.covers for v in valid), default=0)
    _signers(valid, allowed, found)
    if not found.problems:
        found.gap = _gap(raws, valid, allowed, found)
    return found


def _in_file(
    raws: list[dict[str, Any]], session_id: str, hashes: list[str], found: SignatureFindings
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
        # A signature event right after its head covers itself: it adds nothing else.
        covers = index + 1 if head_seq == index - 1 else head_seq + 1
        valid.append(_Valid(signature, covers, f"line {line}", line))
    return valid


def _detached(
    sig_file: Path, raws: list[dict[str, Any]], last: Head, found: SignatureFindings
) -> _Valid | None:
    line = len(raws)
    try:
        text = sig_file.read_text(encoding="ascii")
        signature = parse(text)
        check(signature, head_bytes(last.session_id, last.seq, last.hash))
    except (OSError, UnicodeDecodeError) as exc:
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
    return _Valid(signature, last.seq + 1, str(sig_file), line)


def _signers(valid: list[_Valid], allowed: AllowedSigners | None, found: SignatureFindings) -> None:
    by_key: dict[bytes, SignerReport] = {}
    for v in valid:
        sig = v.signature
        report = by_key.get(sig.public_blob)
        if report is None:
            principals = allowed.principals_for(sig.public_blob, NAMESPACE) if allowed else []
            if allowed is not None and not principals:
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
            )
            by_key[sig.public_blob] = report
        elif v.covers >= report.covers:
            report.covers, report.where = v.covers, v.where
    found.signers = list(by_key.values())


def _gap(
    raws: list[dict[str, Any]],
    valid: list[_Valid],
    allowed: AllowedSigners | None,
    found: SignatureFindings,
) -> str | None:
    """Why a transcript whose signatures all hold is still integrity only, or None."""
    total, covered = len(raws), found.covered
    if not valid:
        return "not signed"
    if covered < total:
        tail = raws[covered:]
        stopped = next(
            (r for r in tail if r.get("type") == "error" and r.get("where") == SIGNING), None
        )
        if stopped is not None:
            return f"events {covered}-{total - 1} are not signed: {stopped.get('message')}"
        if any(r.get("type") == "session_ended" for r in raws):
            found.problems.append(
                (
                    covered + 1,
                    f"the session ended, but its end is not signed: events {covered}-"
                    f"{total - 1} are covered by no signature ({found.detached or 'no .sig file'}"
                    " does not sign the end); they were replaced or added after signing, or "
                    "the .sig file was removed",
                )
            )
            return None
        return f"events {covered}-{total - 1} are not signed: the run stopped before signing them"
    if allowed is None:
        return (
            "the signer is not checked: no allowed signers (pass --allowed-signers FILE, or "
            "set [sign] allowed_signers in sleuth.toml)"
        )
    return None
