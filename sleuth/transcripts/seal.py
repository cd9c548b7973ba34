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

from sleuth.transcripts.events import ErrorEvent, SignatureEvent
from sleuth.transcripts.ledger import LedgerEntry, LedgerError, append_entry
from sleuth.transcripts.safe_files import replace_whole
from sleuth.transcripts.sign import Signer, SigningKeyError, fingerprint, head_bytes, sign
from sleuth.transcripts.store import Head

SIGNING = "sign"
"""ErrorEvent.where for a key that stopped signing mid-run."""


def detached_path(transcript: Path) -> Path:
    """`T.jsonl.sig`: the signature over the session's final head."""
    return transcript.with_name(transcript.name + ".sig")


@dataclass
class Seal:
    signer: Signer | None
    ledger: Path | None
    warnings: list[str] = field(default_factory=list)
    """What could not be signed or recorded, for the command to say after the run."""

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
                self.warnings.append(f"the end of {path} is not signed: {exc}")
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


def write_detached(path: Path, armored: str) -> None:
    """Write `path` whole, durably and 0600: a reader never sees half a signature, and a link
    planted at its name or at the temporary one is replaced, never written through."""
    replace_whole(path, armored.encode("ascii"))
