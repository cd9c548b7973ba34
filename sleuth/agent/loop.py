"""The investigation loop: send the conversation, run the turn's tool calls, repeat.

```python
inv = start_investigation(question, brain, ctx, settings, Path("transcripts"))
result = inv.run()          # -> RunResult(status="answered", findings=[...])
```

Every step is appended to the transcript as it happens. The unusual ends of a
run (an answer, a spent budget, a refusal, a brain that gives up) are
exceptions that carry their status, mini-swe-agent style.

Stop reasons, in the Messages API's words (the OpenAI brain maps its own):
`tool_use` runs the calls; `end_turn` / `stop_sequence` end the run, `answered`
only with a grounded finding, else `unsupported`; `refusal` ends it `refused`;
`max_tokens` and `model_context_window_exceeded` cut a reply short, so its calls
are answered "not run" and never executed, the next turn gets more room, and a
full context takes the final-report path; `pause_turn` asks for the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sleuth.agent.budget import Meter
from sleuth.agent.calls import CallPipeline, Consent, Executor, live_consent, run_live
from sleuth.agent.findings import REPORT_FINDING, Grounder, summarise
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.history import assistant_message, budget_notice, output_notice, pseudo_call
from sleuth.agent.protocols import Brain, BrainError, BrainReply, Message, Observer, Quiet, Request
from sleuth.agent.turn_calls import TurnCalls
from sleuth.config import Budget, ModelPrice
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import (
    BudgetNotice,
    ContentBlock,
    ErrorEvent,
    Finding,
    HostInfo,
    ModelTurn,
    SessionEnded,
    SessionStatus,
    ToolSpec,
    Totals,
)
from sleuth.transcripts.recording import CUT_OFF, MODEL_OUTPUT
from sleuth.transcripts.store import TranscriptWriter


class Stop(Exception):
    status: SessionStatus = "error"


class Answered(Stop):
    status = "answered"


class BudgetExhausted(Stop):
    status = "budget_exhausted"


class Refused(Stop):
    status = "refused"


class Unsupported(Stop):
    """The model ended without a grounded finding: its text is not an answer."""

    status = "unsupported"


UNSUPPORTED_NOTE = "unsupported by evidence (no grounded finding)"
MAX_OUTPUT_NOTICES = 2
"""Replies that write a call as text get this many notices; the next one ends the run."""
NO_GROUNDED_FINDING_BEFORE = "no grounded finding before the budget ended the run"
CONTEXT_FULL = "the conversation fills the model's context window"


@dataclass
class RunResult:
    status: SessionStatus
    answer: str
    findings: list[Finding]
    totals: Totals
    transcript: str


@dataclass
class Investigation:
    """One question, one brain, one transcript. `messages` starts a resumed run mid-way.

    A turn's calls run through the call pipeline (`agent/calls.py`), built with the executor,
    consent, grounder and findings when the Investigation is built: pass them here, not later.
    """

    brain: Brain
    ctx: ToolContext
    writer: TranscriptWriter
    system: str
    tools: list[ToolSpec]
    messages: list[Message]
    budget: Budget
    question: str = ""
    hosts: list[HostInfo] = field(default_factory=list)
    """The question and hosts as data, for brains that plan from them (the playbook)."""
    price: ModelPrice | None = None
    observer: Observer = field(default_factory=Quiet)
    grounder: Grounder = field(default_factory=Grounder)
    findings: list[Finding] = field(default_factory=list)
    tool_data: dict[str, Any] = field(default_factory=dict)
    totals: Totals | None = None
    workers: int = 8
    executor: Executor = run_live
    consent: Consent = live_consent
    session_id: str = ""
    """The transcript's session id, for the call pipeline's telemetry."""
    fleet: FleetView | None = None
    """The groups fleet calls may name (`host="@NAME"`), from session_started."""

    def __post_init__(self) -> None:
        self.meter = Meter(self.budget, self.price, self.totals)
        self.final_reason: str | None = None
        self.notices = 0
        self.more_room = False
        self.turn = self.meter.totals.turns
        """The model turn in progress: a finding may quote only calls of earlier turns."""
        self.calls = CallPipeline(
            self.ctx,
            self.writer.append,
            self.grounder,
            self.executor,
            self.consent,
            self.findings,
            self.session_id,
            self.fleet,
        )
        self.turn_calls = TurnCalls(
            self.calls, self.writer, self.observer, self.tool_data, self.workers
        )

    def run(self) -> RunResult:
        status: SessionStatus = "error"
        answer = ""
        try:
            while True:
                self.step()
        except Stop as stop:
            status, answer = stop.status, str(stop)
        except BrainError as exc:
            self.writer.append(ErrorEvent(where="brain", message=str(exc)))
            status, answer = ("budget_exhausted" if self.final_reason else "error"), str(exc)
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        except Exception as exc:  # a bug must still end the transcript with what happened
            self.writer.append(ErrorEvent(where="loop", message=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self.calls.keep_unmended()
            totals = self.meter.snapshot()
            status, answer, summary = ending(status, answer, self.findings)
            self.writer.append(SessionEnded(status=status, summary=summary, totals=totals))
            self.writer.close()
        return RunResult(status, answer, self.findings, totals, str(self.writer.path))

    def step(self) -> None:
        self.writer.checkpoint()  # the turn boundary: sign what the last turn recorded
        turn = self.turn = self.meter.totals.turns + 1
        self.observer.turn_started(turn)
        try:
            reply = self.brain.complete(self._request())
        except BrainError as exc:
            if exc.kind != "context" or self.final_reason:
                raise
            self.writer.append(ErrorEvent(where="brain", message=str(exc)))
            return self.finish(CONTEXT_FULL)
        self._record_turn(turn, reply)
        stop, content = reply.response.stop_reason, reply.response.content
        text = "\n".join(b.text or "" for b in content if b.text)
        if stop == "refusal":
            raise Refused(text or "the model declined to answer (stop_reason: refusal)")
        self.messages.append(assistant_message(content))
        calls = [b for b in content if b.type == "tool_use"]
        cut = stop in CUT_OFF
        self.more_room = cut and bool(calls) and not self.more_room
        if calls:
            results = self.turn_calls.cut_off(calls, stop or "") if cut else self._run(calls)
            self.messages.append({"role": "user", "content": results})
        if self.final_reason:
            raise BudgetExhausted(self.final_reason)
        if stop == "model_context_window_exceeded":
            return self.finish(CONTEXT_FULL)
        if not calls and stop != "pause_turn":
            self._no_calls(text)
        if reason := self.meter.exhausted():
            self.finish(reason)
        return None

    def finish(self, reason: str) -> None:
        """The final-report path: one last turn, in which only report_finding runs."""
        self.final_reason = reason
        self.writer.append(BudgetNotice(reason=reason))
        self.observer.note(budget_notice(reason))
        self.messages[-1]["content"].append({"type": "text", "text": budget_notice(reason)})

    def _request(self) -> Request:
        return Request(
            self.system,
            self.messages,
            self.tools,
            self.final_reason is not None,
            self.observer.retry,
            self.tool_data,
            question=self.question,
            hosts=self.hosts,
            groups={name: list(m) for name, m in self.fleet.groups.items()} if self.fleet else {},
            more_room=self.more_room,
            deadline=self.meter.deadline(),
            max_output=self.meter.output_left(),
        )

    def _record_turn(self, turn: int, reply: BrainReply) -> None:
        cost = self.meter.add_turn(reply.usage)
        self.writer.append(
            ModelTurn(turn=turn, request_messages=len(self.messages), cost_usd=cost, **dict(reply))
        )
        self.observer.turn_ended(turn, reply, cost)

    def _run(self, calls: list[ContentBlock]) -> list[dict[str, Any]]:
        """The turn's calls, as many as the budget still allows (none on the final report)."""
        tools = sum(1 for c in calls if c.name != REPORT_FINDING)
        allowed = 0 if self.final_reason else self.meter.tool_calls_left()
        self.meter.add_tool_calls(min(tools, allowed))
        refusal = self.final_reason or "the tool-call budget is spent"
        return self.turn_calls.run(calls, self.turn, allowed, refusal)

    def _no_calls(self, text: str) -> None:
        """A reply with no calls ends the run, unless it wrote a call as text: then the model
        is told so, a bounded number of times."""
        if any(f.grounded for f in self.findings):
            raise Answered(text)
        snippet = pseudo_call(text)
        if snippet is None or self.notices >= MAX_OUTPUT_NOTICES:
            raise Unsupported(text)
        self.notices += 1
        notice = output_notice(snippet)
        self.writer.append(ErrorEvent(where=MODEL_OUTPUT, message=notice))
        self.observer.note("the reply wrote a tool call as text; nothing ran, the model is told")
        self.messages.append({"role": "user", "content": [{"type": "text", "text": notice}]})


def ending(
    status: SessionStatus, answer: str, findings: list[Finding]
) -> tuple[SessionStatus, str, str]:
    """The status, answer and summary a run ends with, from how it stopped and what it found."""
    summary = summarise(findings)
    if status == "budget_exhausted" and not any(f.grounded for f in findings):
        # Nothing grounded: no answer, whatever ended the run (exit 3 either way).
        # budget_exhausted stays for a grounded but unfinished investigation.
        status, answer = "unsupported", f"{NO_GROUNDED_FINDING_BEFORE}: {answer}"
        summary += f"\n\n{answer}"
    elif status == "unsupported" and answer:
        # Kept with the run, so show (text, md, html) tells it is no answer.
        summary += f"\n\nThe model's answer, {UNSUPPORTED_NOTE}:\n{answer}"
    return status, answer, summary
