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

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from sleuth.agent.budget import Meter
from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder, summarise
from sleuth.agent.history import (
    CUT_OFF_RESULT,
    assistant_message,
    budget_notice,
    output_notice,
    pseudo_call,
    tool_result_block,
)
from sleuth.agent.protocols import UNPARSED, Brain, BrainError, Message, Observer, Quiet, Request
from sleuth.agent.records import approval_event, tool_event
from sleuth.config import Budget, ModelPrice
from sleuth.errors import ErrorKind
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ApprovalHook, execute
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import (
    BudgetNotice,
    ContentBlock,
    ErrorEvent,
    Finding,
    FindingEvent,
    HostInfo,
    ModelTurn,
    SessionEnded,
    SessionStatus,
    ToolExecuted,
    ToolSpec,
    Totals,
)
from sleuth.transcripts.recording import CUT_OFF, MODEL_OUTPUT
from sleuth.transcripts.redact import redact
from sleuth.transcripts.store import TranscriptWriter


class Executor(Protocol):
    """Runs one tool call; `registry.execute` unless a replay answers from the recording."""

    def __call__(
        self,
        ctx: ToolContext,
        name: str,
        raw: dict[str, Any],
        *,
        on_approval: ApprovalHook | None = None,
    ) -> ToolResult: ...


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
CUT_WHERE = "cut_off"


@dataclass
class RunResult:
    status: SessionStatus
    answer: str
    findings: list[Finding]
    totals: Totals
    transcript: str


@dataclass
class Investigation:
    """One question, one brain, one transcript. `messages` starts a resumed run mid-way."""

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
    executor: Executor = execute

    def __post_init__(self) -> None:
        self.meter = Meter(self.budget, self.price, self.totals)
        self.final_reason: str | None = None
        self.notices = 0
        self.more_room = False
        self.turn = self.meter.totals.turns
        """The model turn in progress: a finding may quote only calls of earlier turns."""

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
            for call_id, finding in self.grounder.unmended():
                self._keep(call_id, finding)
            totals = self.meter.snapshot()
            summary = summarise(self.findings)
            if status == "budget_exhausted" and not any(f.grounded for f in self.findings):
                # Nothing grounded: no answer, whatever ended the run (exit 3 either way).
                # budget_exhausted stays for a grounded but unfinished investigation.
                status, answer = "unsupported", f"{NO_GROUNDED_FINDING_BEFORE}: {answer}"
                summary += f"\n\n{answer}"
            elif status == "unsupported" and answer:
                # Kept with the run, so show (text, md, html) tells it is no answer.
                summary += f"\n\nThe model's answer, {UNSUPPORTED_NOTE}:\n{answer}"
            self.writer.append(SessionEnded(status=status, summary=summary, totals=totals))
            self.writer.close()
        return RunResult(status, answer, self.findings, totals, str(self.writer.path))

    def step(self) -> None:
        turn = self.turn = self.meter.totals.turns + 1
        self.observer.turn_started(turn)
        request = Request(
            self.system,
            self.messages,
            self.tools,
            self.final_reason is not None,
            self.observer.retry,
            self.tool_data,
            question=self.question,
            hosts=self.hosts,
            more_room=self.more_room,
            deadline=self.meter.deadline(),
            max_output=self.meter.output_left(),
        )
        try:
            reply = self.brain.complete(request)
        except BrainError as exc:
            if exc.kind != "context" or self.final_reason:
                raise
            self.writer.append(ErrorEvent(where="brain", message=str(exc)))
            return self.finish(CONTEXT_FULL)
        cost = self.meter.add_turn(reply.usage)
        self.writer.append(
            ModelTurn(
                turn=turn,
                request_messages=len(self.messages),
                request_hash=reply.request_hash,
                response=reply.response,
                usage=reply.usage,
                cost_usd=cost,
                latency_s=reply.latency_s,
                retries=reply.retries,
            )
        )
        self.observer.turn_ended(turn, reply, cost)
        stop, content = reply.response.stop_reason, reply.response.content
        text = "\n".join(b.text or "" for b in content if b.text)
        if stop == "refusal":
            raise Refused(text or "the model declined to answer (stop_reason: refusal)")
        self.messages.append(assistant_message(content))
        calls = [b for b in content if b.type == "tool_use"]
        cut = stop in CUT_OFF
        self.more_room = cut and bool(calls) and not self.more_room
        if calls:
            results = self.cut_off(calls, stop or "") if cut else self.run_calls(calls)
            self.messages.append({"role": "user", "content": results})
        if self.final_reason:
            raise BudgetExhausted(self.final_reason)
        if stop == "model_context_window_exceeded":
            return self.finish(CONTEXT_FULL)
        if not calls and stop != "pause_turn":
            if any(f.grounded for f in self.findings):
                raise Answered(text)
            snippet = pseudo_call(text)
            if snippet is None or self.notices >= MAX_OUTPUT_NOTICES:
                raise Unsupported(text)
            self.notices += 1
            notice = output_notice(snippet)
            self.writer.append(ErrorEvent(where=MODEL_OUTPUT, message=notice))
            self.observer.note(
                "the reply wrote a tool call as text; nothing ran, the model is told"
            )
            self.messages.append({"role": "user", "content": [{"type": "text", "text": notice}]})
        if reason := self.meter.exhausted():
            self.finish(reason)
        return None

    def finish(self, reason: str) -> None:
        """The final-report path: one last turn, in which only report_finding runs."""
        self.final_reason = reason
        self.writer.append(BudgetNotice(reason=reason))
        self.observer.note(budget_notice(reason))
        self.messages[-1]["content"].append({"type": "text", "text": budget_notice(reason)})

    def cut_off(self, calls: list[ContentBlock], stop: str) -> list[dict[str, Any]]:
        """A reply cut short may hold a half-written call: none of its calls run."""
        names = ", ".join(f"{c.id} ({c.name})" for c in calls)
        message = f"reply cut off ({stop}); not run: {names}"
        self.writer.append(ErrorEvent(where=CUT_WHERE, message=message))
        self.observer.note(message)
        return [tool_result_block(c.id or "", CUT_OFF_RESULT, True) for c in calls]

    def run_calls(self, calls: list[ContentBlock]) -> list[dict[str, Any]]:
        """Tool calls run concurrently; report_finding afterwards, so it can quote this turn."""
        tools = [c for c in calls if c.name != REPORT_FINDING]
        allowed = 0 if self.final_reason else self.meter.tool_calls_left()
        self.meter.add_tool_calls(min(len(tools), allowed))
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {
                c.id: pool.submit(self._run_tool, c, i < allowed) for i, c in enumerate(tools)
            }
            results = {cid: f.result() for cid, f in futures.items()}
        for c in calls:
            if c.name == REPORT_FINDING:
                results[c.id] = self._report(c)
        return [results[c.id] for c in calls]

    def _run_tool(self, call: ContentBlock, allowed: bool) -> dict[str, Any]:
        call_id, name, raw = call.id or "", call.name or "", call.input or {}
        host = str(raw.get("host", "local"))
        self.observer.tool_started(call_id, name, host, _summary(raw))
        if set(raw) == {UNPARSED}:
            result = ToolResult.failure(
                f"the arguments of this {name} call are not a JSON object: "
                f"{str(raw[UNPARSED])[:300]!r}. Call it again with a JSON object that follows "
                "the tool's schema. Nothing was run.",
                ErrorKind.INVALID_INPUT,
            )
        elif allowed:
            result = self.executor(self.ctx, name, raw, on_approval=self._approval_hook(call_id))
        else:
            result = _refused(self.final_reason or "the tool-call budget is spent")
        output = redact(result.output)
        self.grounder.record(CallRecord(call_id, name, raw, output, result.ok, self.turn))
        self.tool_data[call_id] = result.data
        self.writer.append(tool_event(call_id, name, raw, result))
        if result.traceback:  # a bug, not a failed call: say so, and keep where it happened
            self.writer.append(
                ErrorEvent(
                    where="tool", message=redact(f"{call_id} {result.error}\n{result.traceback}")
                )
            )
            self.observer.note(f"{result.error} (traceback in the transcript)")
        self.observer.tool_ended(call_id, result.ok, result.duration_s)
        return tool_result_block(call_id, output, not result.ok)

    def _report(self, call: ContentBlock) -> dict[str, Any]:
        outcome = self.grounder.report(call.id or "", call.input or {}, self.turn)
        self.writer.append(
            ToolExecuted(
                call_id=call.id or "",
                tool=REPORT_FINDING,
                input=call.input or {},
                ok=not outcome.is_error,
                output=outcome.feedback,
                error_kind=outcome.kind,
                data={"quotes": [q.model_dump(mode="json") for q in outcome.quotes]},
            )
        )
        if outcome.finding is not None:
            self._keep(call.id or "", outcome.finding)
        return tool_result_block(call.id or "", outcome.feedback, outcome.is_error)

    def _keep(self, call_id: str, finding: Finding) -> None:
        self.findings.append(finding)
        self.writer.append(FindingEvent(call_id=call_id, finding=finding))

    def _approval_hook(self, call_id: str) -> ApprovalHook:
        """Records one call's approval in this run's transcript; the shared context is left as
        it was given, so another run on it records only into its own."""

        def record(request: ApprovalRequest, decision: ApprovalDecision) -> None:
            self.writer.append(approval_event(call_id, request, decision))

        return record


def _refused(reason: str) -> ToolResult:
    return ToolResult.failure(f"not run: {reason}. Report what you have with report_finding.")


def _summary(raw: dict[str, Any]) -> str:
    # Whole: the view shortens it for a terminal and keeps it whole for a log.
    return " ".join(f"{k}={v}" for k, v in raw.items() if k != "host")
