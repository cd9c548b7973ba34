"""The events exactly as stored, with the verification verdict, for programs: JSON whose
unprintable characters are written as JSON escapes, the same value to a parser and nothing
that acts on a terminal that shows it."""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.transcripts.controls import printable_json
from sleuth.transcripts.events import Event
from sleuth.transcripts.render.phrases import Banner


def render_json(events: Sequence[Event], banner: Banner | None = None) -> str:
    """`{"verified": ..., "verdict": ..., "banner": ..., "events": [...]}`: `sleuth verify`'s
    verdict and headline first (verified: it did not fail), the events exactly as stored."""
    data = {
        "verified": banner is None or banner.verdict != "failed",
        "verdict": banner.verdict if banner else None,
        "banner": banner.text if banner else None,
        "events": [event.model_dump(mode="json") for event in events],
    }
    return printable_json(data, indent=2) + "\n"
