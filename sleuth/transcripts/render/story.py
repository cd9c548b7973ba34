"""The story every format tells: the events regrouped for reading, and the phrases the
formats share (status, totals, grounding marks), so they agree on what is shown."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sleuth.transcripts.events import (
    Event,
    Evidence,
    FindingEvent,
    ModelTurn,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
    Totals,
)
from sleuth.transcripts.recording import totals

FOLD_LINES = 20
"""Outputs longer than this many lines (or FOLD_CHARS) are folded."""
FOLD_CHARS = 2000


@dataclass
class Story:
    """The events regrouped for reading. Steps keep the transcript's order."""

    started: SessionStarted | None = None
    steps: list[Event] = field(default_factory=list)
    ended: SessionEnded | None = None
    calls: dict[str, ToolExecuted] = field(default_factory=dict)
    events: Sequence[Event] = ()

    def segment(self, started: SessionStarted) -> int:
        """1 for the first run, 2 for the first resume, and so on."""
        resumes = [s for s in self.steps if isinstance(s, SessionStarted)]
        return 2 + next((i for i, s in enumerate(resumes) if s is started), 0)


def build_story(events: Sequence[Event]) -> Story:
    story = Story(events=events)
    for event in events:
        if isinstance(event, SessionStarted) and story.started is None:
            story.started = event
        elif isinstance(event, SessionEnded):
            story.ended = event
        else:
            story.steps.append(event)
            if isinstance(event, ToolExecuted):
                story.calls[event.call_id] = event
    return story


def totals_of(story: Story) -> Totals:
    """The recorded totals, or ones counted by the reader when the session never ended."""
    if story.ended is not None:
        return story.ended.totals
    return totals(story.events)


def reasoning(turn: ModelTurn) -> str:
    return "\n\n".join(
        block.text for block in turn.response.content if block.type == "text" and block.text
    )


def command_lines(call: ToolExecuted) -> list[str]:
    return [" ".join(_shell_word(word) for word in argv) for argv in call.result.argv]


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_./:=@%+,-]+", word) else json.dumps(word)


def is_long(text: str) -> bool:
    return text.count("\n") >= FOLD_LINES or len(text) > FOLD_CHARS


def anchor(call_id: str) -> str:
    return "call-" + re.sub(r"[^A-Za-z0-9_-]", "-", call_id)


def call_label(story: Story, call_id: str) -> str:
    call = story.calls.get(call_id)
    if call is None:
        return f"{call_id} (not in this transcript)"
    return f"{call_id} ({tool_where(call)})"


def tool_where(call: ToolExecuted) -> str:
    """`grep on gpu1`; report_finding runs on no host, so it says none."""
    return f"{call.tool} on {call.host}" if call.host else call.tool


def findings_of(story: Story) -> list[FindingEvent]:
    return [step for step in story.steps if isinstance(step, FindingEvent)]


def segment_line(s: SessionStarted, number: int) -> str:
    return f"resumed here (segment {number}) from {s.resumed_from} · {session_line(s)}"


def call_status(call: ToolExecuted) -> str:
    if not call.result.ok:
        return "failed"
    return "ok" if call.result.exit_code in (None, 0) else f"exit {call.result.exit_code}"


def totals_line(story: Story) -> str:
    t = totals_of(story)
    status = story.ended.status if story.ended else "not finished (no session_ended event)"
    return (
        f"status {status} · {t.turns} turns · {t.tool_calls} tool calls · "
        f"{t.input_tokens} in / {t.output_tokens} out tokens "
        f"(cache {t.cache_read_tokens} read, {t.cache_write_tokens} written) · "
        f"${t.cost_usd:.4f} · {t.wall_s:.1f} s"
    )


def unsupported_answer(story: Story) -> str | None:
    """A run that ended with no grounded finding: the model's answer, marked as what it is."""
    if story.ended is not None and story.ended.status == "unsupported":
        return story.ended.summary
    return None


def session_line(s: SessionStarted) -> str:
    hosts = ", ".join(
        f"{h.name} ({h.address})" if h.address and h.address != h.name else h.name for h in s.hosts
    )
    hosts = hosts or "none"
    model = f" ({s.model})" if s.model else ""
    return f"session {s.session_id} · brain {s.brain}{model} · hosts {hosts}"


def grounded_mark(grounded: bool | None) -> str:
    return {True: "✓ grounded", False: "✗ not grounded", None: "unchecked"}[grounded]


def evidence_head(ev: Evidence) -> str:
    """`lines 12-14 · ✓ grounded`, or `✗ not grounded: cut_in_word (line 3)`."""
    mark = grounded_mark(ev.grounded)
    if ev.failure is not None:
        mark += f": {ev.failure}" + (f" (line {ev.line})" if ev.line is not None else "")
    return f"lines {ev.lines} · {mark}" if ev.lines else mark


def evidence_note(ev: Evidence) -> str | None:
    """For a quote cut inside a word: what it was grounded on once trimmed."""
    if ev.lines or ev.text is None:
        return None
    return f"cut inside a word; grounded on: {ev.text}"
