"""One model turn's tool calls: run them, redact, feed the grounding check, record each.

```python
calls = TurnCalls(ctx, writer, observer, grounder, findings, tool_data, execute)
blocks = calls.run(content_calls, turn=3, allowed=2, refusal="the tool-call budget is spent")
```

The loop decides how many calls the budget allows; this runs that many (concurrently), answers
the rest "not run", then checks the turn's report_finding calls, so a finding may quote the
calls of the same turn. Every call is recorded in the transcript as it ends.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder
from sleuth.agent.history import CUT_OFF_RESULT, tool_result_block
from sleuth.agent.protocols import UNPARSED, Observer
from sleuth.agent.records import approval_event, tool_event
from sleuth.errors import ErrorKind
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ApprovalHook
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import ContentBlock, ErrorEvent, Finding, FindingEvent, ToolExecuted
from sleuth.transcripts.redact import redact
from sleuth.transcripts.store import TranscriptWriter

CUT_WHERE = "cut_off"


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


@dataclass
class TurnCalls:
    """Runs and records the calls of a run's turns; the lists and dicts are the run's own."""

    ctx: ToolContext
    writer: TranscriptWriter
    observer: Observer
    grounder: Grounder
    findings: list[Finding]
    tool_data: dict[str, Any]
    executor: Executor
    workers: int = 8

    def run(
        self, calls: list[ContentBlock], turn: int, allowed: int, refusal: str
    ) -> list[dict[str, Any]]:
        """Tool calls run concurrently, the first `allowed` of them for real and the rest
        refused with `refusal`; report_finding afterwards, so it can quote this turn."""
        tools = [c for c in calls if c.name != REPORT_FINDING]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {
                c.id: pool.submit(self._run_tool, c, turn, None if i < allowed else refusal)
                for i, c in enumerate(tools)
            }
            results = {cid: f.result() for cid, f in futures.items()}
        for c in calls:
            if c.name == REPORT_FINDING:
                results[c.id] = self._report(c, turn)
        return [results[c.id] for c in calls]

    def cut_off(self, calls: list[ContentBlock], stop: str) -> list[dict[str, Any]]:
        """A reply cut short may hold a half-written call: none of its calls run."""
        names = ", ".join(f"{c.id} ({c.name})" for c in calls)
        message = f"reply cut off ({stop}); not run: {names}"
        self.writer.append(ErrorEvent(where=CUT_WHERE, message=message))
        self.observer.note(message)
        return [tool_result_block(c.id or "", CUT_OFF_RESULT, True) for c in calls]

    def keep_unmended(self) -> None:
        """At the end of a run, findings still waiting for a mend are kept as they are."""
        for call_id, finding in self.grounder.unmended():
            self._keep(call_id, finding)

    def _run_tool(self, call: ContentBlock, turn: int, refusal: str | None) -> dict[str, Any]:
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
        elif refusal is None:
            result = self.executor(self.ctx, name, raw, on_approval=self._approval_hook(call_id))
        else:
            result = _refused(refusal)
        output = redact(result.output)
        self.grounder.record(CallRecord(call_id, name, raw, output, result.ok, turn))
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

    def _report(self, call: ContentBlock, turn: int) -> dict[str, Any]:
        outcome = self.grounder.report(call.id or "", call.input or {}, turn)
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
