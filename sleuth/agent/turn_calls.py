"""One model turn's tool calls: each through the call pipeline, concurrently, then the turn's
report_finding calls.

```python
calls = TurnCalls(pipeline, writer, observer, tool_data)
blocks = calls.run(content_calls, turn=3, allowed=2, refusal="the tool-call budget is spent")
```

The loop decides how many calls the budget allows; this runs that many (concurrently) through
`agent/calls.py`, answers the rest "not run", then the turn's report_finding calls, so a
finding may quote the calls of the same turn.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sleuth.agent.calls import Call, CallPipeline
from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.history import CUT_OFF_RESULT, tool_result_block
from sleuth.agent.protocols import UNPARSED, Observer
from sleuth.errors import ErrorKind
from sleuth.transcripts.events import ContentBlock, ErrorEvent
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter

CUT_WHERE = "cut_off"


@dataclass
class TurnCalls:
    """Runs the calls of a run's turns; `tool_data` is the run's own."""

    pipeline: CallPipeline
    writer: TranscriptWriter
    observer: Observer
    tool_data: dict[str, Any]
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
                outcome = self.pipeline.report(_call(c), turn)
                results[c.id] = tool_result_block(c.id or "", outcome.feedback, outcome.is_error)
        return [results[c.id] for c in calls]

    def cut_off(self, calls: list[ContentBlock], stop: str) -> list[dict[str, Any]]:
        """A reply cut short may hold a half-written call: none of its calls run."""
        names = ", ".join(f"{c.id} ({c.name})" for c in calls)
        message = f"reply cut off ({stop}); not run: {names}"
        self.writer.append(ErrorEvent(where=CUT_WHERE, message=message))
        self.observer.note(message)
        return [tool_result_block(c.id or "", CUT_OFF_RESULT, True) for c in calls]

    def _run_tool(self, block: ContentBlock, turn: int, refusal: str | None) -> dict[str, Any]:
        call = _call(block)
        self.observer.tool_started(call.call_id, call.tool, call.host, _summary(call.input))
        if set(call.input) == {UNPARSED}:
            result = self.pipeline.answered(call, _unparsed(call), turn)
        elif refusal is None:
            result = self.pipeline.tool(call, turn)
        else:
            result = self.pipeline.answered(call, _refused(refusal), turn)
        self.tool_data[call.call_id] = result.data
        if result.traceback:
            self.observer.note(f"{result.error} (traceback in the transcript)")
        self.observer.tool_ended(call.call_id, result.ok, result.duration_s)
        return tool_result_block(call.call_id, result.output, not result.ok)


def _call(block: ContentBlock) -> Call:
    return Call(block.id or "", block.name or "", block.input or {})


def _unparsed(call: Call) -> ToolResult:
    return ToolResult.failure(
        f"the arguments of this {call.tool} call are not a JSON object: "
        f"{str(call.input[UNPARSED])[:300]!r}. Call it again with a JSON object that follows "
        "the tool's schema. Nothing was run.",
        ErrorKind.INVALID_INPUT,
    )


def _refused(reason: str) -> ToolResult:
    return ToolResult.failure(f"not run: {reason}. Report what you have with report_finding.")


def _summary(raw: dict[str, Any]) -> str:
    # Whole: the view shortens it for a terminal and keeps it whole for a log.
    return " ".join(f"{k}={v}" for k, v in raw.items() if k != "host")
