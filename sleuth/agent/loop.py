"""The investigation loop: send the conversation, run the turn's tool calls, repeat.

```python
inv = start_investigation(question, brain, ctx, settings, Path("transcripts"))
result = inv.run()          # -> RunResult(status="answered", findings=[...])
```

Every step is appended to the transcript as it happens. The unusual ends of a
run (an answer, a spent budget, a brain that gives up) are exceptions that
carry their status, mini-swe-agent style.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from sleuth.agent.budget import Meter
from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder, summarise
from sleuth.agent.history import assistant_message, budget_notice, tool_result_block
from sleuth.agent.protocols import Brain, BrainError, Message, Observer, Quiet, Request
from sleuth.config import Budget, ModelPrice
from sleuth.tools.policy import ApprovalDecision, ApprovalRequest
from sleuth.tools.registry import ApprovalHook, ToolContext, execute
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import (
    ApprovalEvent,
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
            self.question,
            self.hosts,
        )
        reply = self.brain.complete(request)
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
        self.messages.append(assistant_message(reply.response.content))
        calls = [b for b in reply.response.content if b.type == "tool_use"]
        if calls:
            self.messages.append({"role": "user", "content": self.run_calls(calls)})
        if self.final_reason:
            raise BudgetExhausted(self.final_reason)
        if not calls:
            raise Answered("\n".join(b.text or "" for b in reply.response.content if b.text))
        if reason := self.meter.exhausted():
            self.final_reason = reason
            self.writer.append(BudgetNotice(reason=reason))
            self.observer.note(budget_notice(reason))
            self.messages[-1]["content"].append({"type": "text", "text": budget_notice(reason)})

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
        if allowed:
            result = self.executor(self.ctx, name, raw, on_approval=self._approval_hook(call_id))
        else:
            result = _refused(self.final_reason or "the tool-call budget is spent")
        output = redact(result.output)
        self.grounder.record(CallRecord(call_id, name, raw, output, result.ok, self.turn))
        self.tool_data[call_id] = result.data
        self.writer.append(
            ToolExecuted(
                call_id=call_id,
                tool=name,
                input=raw,
                host=host,
                ok=result.ok,
                output=output,
                error=redact(result.error) if result.error else None,
                data=result.data,
                argv=result.argv,
                exit_code=result.exit_code,
                bytes_cut=result.bytes_cut,
                duration_s=result.duration_s,
                reconnected=result.reconnected,
            )
        )
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
            self.writer.append(
                ApprovalEvent(
                    call_id=call_id,
                    tool=request.tool,
                    host=request.host,
                    input=request.input,
                    approved=decision.approved,
                    by=decision.by,
                    reason=decision.reason,
                )
            )

        return record


def _refused(reason: str) -> ToolResult:
    return ToolResult.failure(f"not run: {reason}. Report what you have with report_finding.")


def _summary(raw: dict[str, Any]) -> str:
    text = " ".join(f"{k}={v}" for k, v in raw.items() if k != "host")
    return text if len(text) <= 80 else text[:77] + "..."
