"""The one reader of a transcript: events in, turns, results, findings and totals out.

    recording = read(load(path).events)
    for turn in recording.turns:            # complete model turns, in order, across resumes
        turn.event, turn.results, turn.findings, turn.budget_notice
    recording.totals                        # what the run spent, counted here and nowhere else

History (the conversation a resumed run continues), replay, resume, render and the budget all
read a transcript through this module, so they agree on what it says. A turn whose tool calls
were not all recorded before the next turn or resume began (a crash mid-turn) is left out:
the resumed run repeated it, and its redone copy is the one that counts. Any number of
crash/resume cycles keep every completed turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sleuth.transcripts.events import (
    ApprovalEvent,
    BudgetNotice,
    ErrorEvent,
    Event,
    Finding,
    FindingEvent,
    ModelTurn,
    SessionEnded,
    SessionStarted,
    SessionStatus,
    ToolExecuted,
    Totals,
)

REPORT_FINDING = "report_finding"
"""The tool a model reports findings with; its calls are not counted as tool calls."""
CUT_OFF = ("max_tokens", "model_context_window_exceeded")
"""Stop reasons that cut a reply short: its tool calls may be half-written and are never run."""


MODEL_OUTPUT = "model_output"
"""ErrorEvent.where for a reply that wrote a call as text; its message is what the model got."""


class NotARecording(Exception):
    """The events hold no session_started, so there is nothing to read."""


@dataclass
class Turn:
    """One model turn and what it produced."""

    event: ModelTurn
    segment: int
    """1 for the first run, 2 after the first resume, and so on."""
    results: dict[str, ToolExecuted] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    budget_notice: str | None = None
    """Set when the budget ran out after this turn's calls: the next turn is the last."""
    output_notice: str | None = None
    """What the model was told when this turn wrote a call as text (nothing ran)."""

    @property
    def calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        blocks = self.event.response.content
        return [(b.id or "", b.name or "", b.input or {}) for b in blocks if b.type == "tool_use"]

    @property
    def cut_off(self) -> bool:
        """The reply stopped at a token limit: its calls were answered "not run", by design."""
        return self.event.response.stop_reason in CUT_OFF

    @property
    def complete(self) -> bool:
        return self.cut_off or all(call_id in self.results for call_id, _, _ in self.calls)


@dataclass
class Recording:
    """A transcript read once: its start, its segments, its complete turns and its end."""

    start: SessionStarted
    segments: list[SessionStarted]
    """The first session_started and one more per `sleuth resume`."""
    turns: list[Turn]
    status: SessionStatus | None
    """None when the session never ended (a crash)."""
    totals: Totals
    calls: list[ToolExecuted] = field(default_factory=list)
    """Every recorded call, in order: a session without model turns (`sleuth tool`, `sleuth
    mcp`) replays these."""
    approvals: dict[str, ApprovalEvent] = field(default_factory=dict)
    """Each call's recorded consent decision, by call id."""
    turnless_findings: list[Finding] = field(default_factory=list)
    """Findings recorded outside any model turn: those of a session without model turns."""

    @property
    def findings(self) -> list[Finding]:
        return [*(f for t in self.turns for f in t.findings), *self.turnless_findings]

    @property
    def budget_notice(self) -> str | None:
        return next((t.budget_notice for t in self.turns if t.budget_notice), None)


def read(events: Sequence[Event]) -> Recording:
    """Split events into complete turns, each with the results and findings it produced."""
    segments = [e for e in events if isinstance(e, SessionStarted)]
    if not segments:
        raise NotARecording("the transcript has no session_started event")
    turns: list[Turn] = []
    current: Turn | None = None
    status: SessionStatus | None = None
    turnless: list[Finding] = []
    for event in events:
        if isinstance(event, ModelTurn | SessionStarted) and current is not None:
            turns.append(current)
            current = None
        if isinstance(event, ModelTurn):
            segment = sum(1 for s in segments if s.seq < event.seq) or 1
            current = Turn(event, segment)
        elif isinstance(event, ToolExecuted) and current is not None:
            current.results[event.call_id] = event
        elif isinstance(event, FindingEvent):
            (current.findings if current is not None else turnless).append(event.finding)
        elif isinstance(event, BudgetNotice) and current is not None:
            current.budget_notice = event.reason
        elif isinstance(event, ErrorEvent) and event.where == MODEL_OUTPUT and current is not None:
            current.output_notice = event.message
        elif isinstance(event, SessionEnded):
            status = event.status
    if current is not None:
        turns.append(current)
    return Recording(
        segments[0],
        segments,
        [t for t in turns if t.complete],
        status,
        totals(events),
        [e for e in events if isinstance(e, ToolExecuted)],
        {e.call_id: e for e in events if isinstance(e, ApprovalEvent)},
        turnless,
    )


def totals(events: Sequence[Event]) -> Totals:
    """What the run spent: every turn paid for (complete or not), every tool call run, and the
    wall time from the first event to the last. The one place totals are counted."""
    spent = Totals()
    for event in events:
        if isinstance(event, ModelTurn):
            spent.turns += 1
            spent.input_tokens += event.usage.input_tokens
            spent.output_tokens += event.usage.output_tokens
            spent.cache_read_tokens += event.usage.cache_read_tokens
            spent.cache_write_tokens += event.usage.cache_write_tokens
            spent.cost_usd += event.cost_usd
        elif isinstance(event, ToolExecuted) and event.tool != REPORT_FINDING:
            spent.tool_calls += 1
    if len(events) > 1 and events[0].ts and events[-1].ts:
        first, last = (_when(e.ts) for e in (events[0], events[-1]))
        spent.wall_s = max(0.0, (last - first).total_seconds())
    return spent


def _when(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))
