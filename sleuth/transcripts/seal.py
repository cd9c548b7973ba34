"""Sealing a transcript as it is written: a signature at each turn boundary, and at its end a
signature in the `.sig` file beside it and an entry in the ledger.

```python
seal = Seal(signer=find_signer(None), ledger=ledger_path(None))
writer = TranscriptWriter.create(Path("transcripts"), session_id, seal=seal)
writer.checkpoint()        # the loop, before each model turn: signs the head so far
```

Turn by turn, the signature goes in the transcript as a `signature` event, so a crash loses
at most the turn in flight. At session_ended the signature can only go beside the
transcript, since nothing may follow the end: `<transcript>.sig` (fsynced), the file
`ssh-keygen -Y verify` reads, and the ledger. A key that stops signing (the agent went away)
is recorded as an `error` event where="sign", and the rest of the run goes on unsigned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from sleuth.transcripts.allowed_signers import AllowedSignersError, read_allowed_signers
from sleuth.transcripts.events import ErrorEvent, SignatureEvent
from sleuth.transcripts.ledger import LedgerEntry, LedgerError, append_entry
from sleuth.transcripts.safe_files import replace_whole
from sleuth.transcripts.sign import (
    NAMESPACE,
    Signer,
    SigningKeyError,
    fingerprint,
    head_bytes,
    key_type,
    sign,
)
from sleuth.transcripts.store import Head

SIGNING = "sign"
"""ErrorEvent.where for a key that stopped signing mid-run."""


def detached_path(transcript: Path) -> Path:
    """`T.jsonl.sig`: the signature over the session's final head."""
    return transcript.with_name(transcript.name + ".sig")


class Signing(BaseModel):
    """Who signed a run's transcript, as `--json` tells a program: the key and the principals
    an allowed_signers file gives it, or that it is not signed, and why."""

    signed: bool = Field(description="True when every turn and the end were signed.")
    key_type: str | None = Field(None, description="ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa...")
    fingerprint: str | None = Field(None, description="`SHA256:...` of the key that signed.")
    source: str | None = Field(None, description="ssh-agent, or the key file signed with.")
    principals: list[str] = Field(
        default_factory=list,
        description="Who the key is, by `[sign] allowed_signers` (as `sleuth verify` checks).",
    )
    principals_note: str | None = Field(
        None, description="Why `principals` is empty: no allowed_signers file, or not in it."
    )
    why_not: str | None = Field(
        None,
        description="Why it is not signed, or not to its end: no key, --no-sign, or "
        "the key stopped signing.",
    )


@dataclass
class Seal:
    signer: Signer | None
    ledger: Path | None
    warnings: list[str] = field(default_factory=list)
    """What could not be signed or recorded, for the command to say after the run."""
    unsigned: str | None = None
    """Why the run is not signed, or stopped being: no key, --no-sign, a key that failed."""

    def __post_init__(self) -> None:
        self._key = self.signer

    def signing(self, allowed_signers: Path | None) -> Signing:
        """Who signed, for `--json`: the principals from `allowed_signers` if given."""
        key = self._key
        if key is None:
            return Signing(signed=False, why_not=self.unsigned or "no key was given to sign")
        blob = key.public_blob
        principals, note = _principals(blob, allowed_signers)
        return Signing(
            signed=self.unsigned is None,
            key_type=key_type(blob),
            fingerprint=fingerprint(blob),
            source=key.source,
            principals=principals,
            principals_note=note,
            why_not=self.unsigned,
        )

    def at_turn(self, path: Path, head: Head) -> SignatureEvent | ErrorEvent | None:
        """The event to append at a turn boundary: the head's signature, the reason signing
        stopped, or None when this run does not sign."""
        signer = self.signer
        if signer is None:
            return None
        try:
            armored = sign(signer, head_bytes(head.session_id, head.seq, head.hash))
        except (SigningKeyError, OSError) as exc:
            message = f"signing stopped: {exc}; the events after seq {head.seq} are not signed"
            self.warnings.append(message)
            self.unsigned = message
            self.close()
            self.signer = None
            return ErrorEvent(where=SIGNING, message=message)
        return SignatureEvent(
            head_seq=head.seq,
            head_hash=head.hash,
            signer=fingerprint(signer.public_blob),
            sshsig=armored,
        )

    def at_end(self, path: Path, head: Head, status: str) -> None:
        """Sign the final head into `.sig` and append it to the ledger."""
        armored = signed_by = None
        if self.signer is not None:
            try:
                armored = sign(self.signer, head_bytes(head.session_id, head.seq, head.hash))
                write_detached(detached_path(path), armored)
                signed_by = fingerprint(self.signer.public_blob)
            except (SigningKeyError, OSError) as exc:
                self.unsigned = f"the end of {path} is not signed: {exc}"
                self.warnings.append(self.unsigned)
        if self.ledger is None:
            return
        entry = LedgerEntry(
            session_id=head.session_id,
            transcript=str(path.resolve()),
            head_seq=head.seq,
            head_hash=head.hash,
            status=status,
            signer=signed_by,
            sshsig=armored,
        )
        try:
            append_entry(self.ledger, entry)
        except LedgerError as exc:
            self.warnings.append(f"{exc}; {path} is not in the ledger")

    def close(self) -> None:
        if self.signer is not None:
            self.signer.close()


def _principals(blob: bytes, allowed_signers: Path | None) -> tuple[list[str], str | None]:
    if allowed_signers is None:
        return [], "no allowed_signers file ([sign] allowed_signers) names who this key is"
    try:
        principals = read_allowed_signers(allowed_signers).principals_for(blob, NAMESPACE)
    except AllowedSignersError as exc:
        return [], str(exc)
    if not principals:
        return [], f"the key is not in {allowed_signers} for namespace {NAMESPACE}"
    return principals, None


def write_detached(path: Path, armored: str) -> None:
    """Write `path` whole, durably and 0600: a reader never sees half a signature, and a link
    planted at its name or at the temporary one is replaced, never written through."""
    replace_whole(path, armored.encode("ascii"))
