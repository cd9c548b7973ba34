"""The story every format tells: the events regrouped for reading (the question, the steps
in order, the end, each fleet call's per-host parts), with the lines about the whole of it
(verdicts, totals) that every format shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sleuth.transcripts.events import (
    Event,
    Finding,
    FindingEvent,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
    Totals,
)
from sleuth.transcripts.recording import totals
from sleuth.transcripts.render.phrases import tool_where


@dataclass
class Story:
    """The events regrouped for reading. Steps keep the transcript's order."""

    started: SessionStarted | None = None
    steps: list[Event] = field(default_factory=list)
    ended: SessionEnded | None = None
    calls: dict[str, ToolExecuted] = field(default_factory=dict)
    events: Sequence[Event] = ()
    parts: dict[str, list[ToolExecuted]] = field(default_factory=dict)
    """Each fleet call's per-host parts, by the fleet call's id; not steps of their own."""

    def segment(self, started: SessionStarted) -> int:
        """1 for the first run, 2 for the first resume, and so on."""
        resumes = [s for s in self.steps if isinstance(s, SessionStarted)]
        return 2 + next((i for i, s in enumerate(resumes) if s is started), 0)

    def findings(self) -> list[Finding]:
        return [step.finding for step in self.steps if isinstance(step, FindingEvent)]

    def call_label(self, call_id: str) -> str:
        call = self.calls.get(call_id)
        if call is None:
            return f"{call_id} (not in this transcript)"
        return f"{call_id} ({tool_where(call)})"

    def totals(self) -> Totals:
        """The recorded totals, or ones counted by the reader when the session never ended."""
        if self.ended is not None:
            return self.ended.totals
        return totals(self.events)

    def totals_line(self) -> str:
        t = self.totals()
        status = self.ended.status if self.ended else "not finished (no session_ended event)"
        return (
            f"status {status} · {t.turns} turns · {t.tool_calls} tool calls · "
            f"{t.input_tokens} in / {t.output_tokens} out tokens "
            f"(cache {t.cache_read_tokens} read, {t.cache_write_tokens} written) · "
            f"${t.cost_usd:.4f} · {t.wall_s:.1f} s"
        )

    def unsupported_answer(self) -> str | None:
        """A run that ended with no grounded finding: the model's answer, marked as what it is."""
        if self.ended is not None and self.ended.status == "unsupported":
            return self.ended.summary
        return None


def build_story(events: Sequence[Event]) -> Story:
    story = Story(events=events)
    for event in events:
        if isinstance(event, SessionStarted) and story.started is None:
            story.started = event
        elif isinstance(event, SessionEnded):
            story.ended = event
        elif isinstance(event, ToolExecuted) and event.fleet is not None:
            story.parts.setdefault(event.fleet, []).append(event)
        else:
            story.steps.append(event)
            if isinstance(event, ToolExecuted):
                story.calls[event.call_id] = event
    return story
