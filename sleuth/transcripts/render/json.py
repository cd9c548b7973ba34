"""The events exactly as stored, with the verification verdict, for programs."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sleuth.transcripts.events import Event


def render_json(events: Sequence[Event], banner: str | None = None) -> str:
    """`{"verified": ..., "banner": ..., "events": [...]}`, the events exactly as stored."""
    data = {
        "verified": banner is None,
        "banner": banner,
        "events": [event.model_dump(mode="json") for event in events],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
