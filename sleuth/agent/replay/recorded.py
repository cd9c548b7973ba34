"""A transcript read once for a replay or a resume: verified, parsed, and split into turns.

```python
recorded = replayable(Path("transcripts/x.jsonl"), anchors)   # one read of the file, verified
recorded.report.headline                                       # verify's verdict, said first
recorded.recording.start.hosts, recorded.events                # what the command hands along
```

`sleuth replay` and `sleuth resume` read the file here and nowhere else: the hosts to
connect to, the replay, the resumed run and the writer that continues the chain all take it
as read. The verdict is `sleuth verify`'s own, against the same anchors (allowed signers,
ledger), so a transcript verify fails is neither replayed nor continued.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sleuth.transcripts.events import Event
from sleuth.transcripts.recording import Recording, read
from sleuth.transcripts.store import LoadedTranscript
from sleuth.transcripts.verify import Anchors, VerifyReport, load_verified, not_verified


class ReplayError(Exception):
    """The transcript cannot be replayed at all (no session_started, unreadable file)."""


class NotVerified(Exception):
    """The transcript fails verification; `report` says where and how."""

    def __init__(self, report: VerifyReport) -> None:
        super().__init__(not_verified(report))
        self.report = report


@dataclass(frozen=True)
class Recorded:
    """A transcript that verified, with its events and the one reader's turns."""

    loaded: LoadedTranscript
    report: VerifyReport
    recording: Recording

    @property
    def path(self) -> Path:
        return self.loaded.path

    @property
    def events(self) -> list[Event]:
        return self.loaded.events


def read_recorded(path: Path, against: Anchors | None = None) -> Recorded:
    """Read, verify (against `against`, as `sleuth verify` would) and parse the transcript at
    `path` in one pass over the file.

    Raises NotVerified when it fails verification (a verified one starts with
    session_started, so the reader always finds its start) and TranscriptError when the
    file cannot be read.
    """
    report, loaded = load_verified(Path(path), against)
    if loaded is None:
        raise NotVerified(report)
    return Recorded(loaded, report, read(loaded.events))


def replayable(source: Path | str | Recorded, against: Anchors | None = None) -> Recorded:
    """The transcript to replay, read once (or as already read); ReplayError when edited."""
    if isinstance(source, Recorded):
        return source
    path = Path(source)
    try:
        return read_recorded(path, against)
    except NotVerified as exc:
        raise ReplayError(
            f"{path}: {exc} A replay of an edited transcript proves nothing."
        ) from exc
