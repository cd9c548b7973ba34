"""The executors a replay runs the loop's tool calls with, and the writer it records into.

```python
cursor = Cursor()
executor = RecordedTools(cursor)        # offline: each call answered from its recorded result
executor = LiveTools(cursor)            # live: each call run for real, compared with the record
writer = MemoryWriter(path, cursor, strict=True)
```
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sleuth.agent.findings import REPORT_FINDING, CallRecord
from sleuth.agent.replay.compare import (
    CallDrift,
    Diverged,
    capped_diff,
    first_ungrounded_call,
    report_changed,
)
from sleuth.agent.replay.cursor import Cursor
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ApprovalHook, execute
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import Event, ToolExecuted
from sleuth.transcripts.redact import redact
from sleuth.transcripts.store import TranscriptWriter


class RecordedTools:
    """An executor answering each call with its recorded result instead of running it."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor

    def __call__(
        self,
        ctx: ToolContext,
        name: str,
        raw: dict[str, Any],
        *,
        on_approval: ApprovalHook | None = None,
    ) -> ToolResult:
        recorded = self._cursor.take(name, raw)
        return ToolResult(
            ok=recorded.ok,
            output=recorded.output,
            data=recorded.data,
            error=recorded.error,
            argv=recorded.argv,
            exit_code=recorded.exit_code,
            bytes_cut=recorded.bytes_cut,
            duration_s=recorded.duration_s or 1e-9,
            reconnected=recorded.reconnected,
        )


class LiveTools:
    """An executor running each call for real and comparing today's output with the recording."""

    def __init__(self, cursor: Cursor) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self.calls: list[CallDrift] = []
        self.outputs: dict[str, CallRecord] = {}
        self._order: dict[str, int] = {}

    def __call__(
        self,
        ctx: ToolContext,
        name: str,
        raw: dict[str, Any],
        *,
        on_approval: ApprovalHook | None = None,
    ) -> ToolResult:
        recorded = self._cursor.take(name, raw)
        if self._cursor.turn is not None:
            order = {cid: i for i, (cid, _, _) in enumerate(self._cursor.turn.calls)}
            self._order[recorded.call_id] = order.get(recorded.call_id, 0)
        result = execute(ctx, name, raw, on_approval=on_approval)
        output = redact(result.output)
        same = output == recorded.output and result.ok == recorded.ok
        drift = CallDrift(
            step=self._cursor.step,
            call_id=recorded.call_id,
            tool=name,
            host=recorded.host,
            same=same,
            recorded_ok=recorded.ok,
            ok=result.ok,
            diff="" if same else capped_diff(recorded.output, output, "recorded", "today"),
        )
        with self._lock:
            self.calls.append(drift)
            self.outputs[recorded.call_id] = CallRecord(
                recorded.call_id, name, raw, output, result.ok, drift.step
            )
        return result

    def report(self) -> list[CallDrift]:
        """Call by call, in the order the recording made them (they ran concurrently)."""
        return sorted(self.calls, key=lambda c: (c.step, self._order.get(c.call_id, 0)))


class MemoryWriter(TranscriptWriter):
    """Keeps a replay's events in memory. A replay is a check, not a new audit trail, and an
    fsync per event would cost more than the whole replay. In offline mode it stops the run at
    the first report_finding whose answer differs from the recorded one."""

    def __init__(self, path: Path, cursor: Cursor, strict: bool) -> None:
        self.path = Path(f"replay of {path}")
        self.events: list[Event] = []
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
        if (recorded.ok, recorded.output) == (event.ok, event.output):
            return
        raise Diverged(
            report_changed(
                turn.event.turn,
                event.call_id,
                recorded.output,
                event.output,
                cause_call_id=first_ungrounded_call(event),
            )
        )
