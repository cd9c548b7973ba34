"""What a replay gives the call pipeline (`agent/calls.py`), and the writer it records into.

```python
cursor = Cursor()
executor = RecordedTools(cursor)        # offline: each call answered from its recorded result
consent = RecordedConsent(recording)    # offline: each call's recorded decision
executor = LiveTools(cursor)            # live: each call run for real, compared with the record
writer = MemoryWriter(path, cursor, strict=True)
```
"""

from __future__ import annotations

import threading
from pathlib import Path

from sleuth.agent.calls import Approval, Call, redacted, run_live
from sleuth.agent.findings import REPORT_FINDING, CallRecord
from sleuth.agent.replay.compare import (
    CallDrift,
    Diverged,
    capped_diff,
    first_ungrounded_call,
    report_changed,
)
from sleuth.agent.replay.cursor import Cursor
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import Tool, ToolInput
from sleuth.transcripts.events import Event, ToolExecuted
from sleuth.transcripts.recording import Recording
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter


class RecordedTools:
    """The executor that answers each call with its recorded result instead of running it."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor

    def __call__(self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult:
        return self._cursor.take(call.tool, call.input).result.model_copy(deep=True)


class RecordedConsent:
    """The consent step of an offline replay: each call gets the decision its recording holds
    (none, when the recording has none for it: its recorded result says why)."""

    def __init__(self, recording: Recording) -> None:
        self._approvals = recording.approvals

    def __call__(
        self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call
    ) -> Approval | None:
        event = self._approvals.get(call.call_id)
        if event is None:
            return None
        request = ApprovalRequest(
            tool=event.tool, host=event.host, input=event.input, argv=event.argv, env=event.env
        )
        decision = ApprovalDecision(
            approved=event.approved, by=event.by, reason=event.reason, rule=event.rule
        )
        return request, decision


class LiveTools:
    """The executor that runs each call for real and compares today's output with the
    recording's."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self.calls: list[CallDrift] = []
        self.outputs: dict[str, CallRecord] = {}
        self._order: dict[str, int] = {}

    def __call__(self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult:
        recorded = self._cursor.take(call.tool, call.input)
        if self._cursor.turn is not None:
            order = {cid: i for i, (cid, _, _) in enumerate(self._cursor.turn.calls)}
            self._order[recorded.call_id] = order.get(recorded.call_id, 0)
        result = run_live(ctx, spec, args, call)
        output, was = redacted(result).output, recorded.result
        same = output == was.output and result.ok == was.ok
        drift = CallDrift(
            step=self._cursor.step,
            call_id=recorded.call_id,
            tool=call.tool,
            host=recorded.host,
            same=same,
            recorded_ok=was.ok,
            ok=result.ok,
            diff="" if same else capped_diff(was.output, output, "recorded", "today"),
        )
        with self._lock:
            self.calls.append(drift)
            self.outputs[recorded.call_id] = CallRecord(
                recorded.call_id, call.tool, call.input, output, result.ok, drift.step
            )
        return result

    def report(self) -> list[CallDrift]:
        """Call by call, in the order the recording made them (they ran concurrently)."""
        return sorted(self.calls, key=lambda c: (c.step, self._order.get(c.call_id, 0)))


class MemoryWriter(TranscriptWriter):
    """Keeps a replay's events in memory. A replay is a check, not a new audit trail, and an
    fsync per event would cost more than the whole replay. In offline mode it stops the run at
    the first report_finding whose answer differs from the recorded one."""

    def __init__(
        self, path: Path, cursor: Cursor, strict: bool, events: list[Event] | None = None
    ) -> None:
        self.path = Path(f"replay of {path}")
        self.events: list[Event] = [] if events is None else events
        self._cursor, self._strict = cursor, strict
        self._lock = threading.Lock()

    def append(self, event: Event) -> Event:
        with self._lock:
            self.events.append(event)
        if self._strict and isinstance(event, ToolExecuted) and event.tool == REPORT_FINDING:
            self._check_report(event)
        return event

    def checkpoint(self) -> None:
        return None

    def close(self) -> None:
        return None

    def _check_report(self, event: ToolExecuted) -> None:
        turn = self._cursor.turn
        recorded = turn.results.get(event.call_id) if turn else None
        if turn is None or recorded is None:
            return
        was, now = recorded.result, event.result
        if (was.ok, was.output) == (now.ok, now.output):
            return
        raise Diverged(
            report_changed(
                turn.event.turn,
                event.call_id,
                was.output,
                now.output,
                cause_call_id=first_ungrounded_call(event),
            )
        )
