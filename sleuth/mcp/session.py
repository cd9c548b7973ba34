"""One MCP client session: one transcript, one grounding check, call ids of its own.

```python
session = McpSession.open(ctx, Path("transcripts"), ClientInfo(name="claude-code", version="2"))
outcome = session.call("read_lines", {"host": "local", "path": "README.md"}, approver)
session.call("report_finding", {..., "evidence": [{"call_id": outcome.call_id, ...}]}, approver)
session.end()
```

Calls arrive from any number of threads at once; each runs through the call pipeline
(`agent/calls.py`: the same validation, consent, redaction, grounding and recording as
`sleuth ask`) on the server's context, so concurrent calls on one SSH host share its one
connection.

Events are written, in order, by one recorder thread, so a call's reply does not wait for the
transcript's fsync (several milliseconds on a busy disk, more than the rest of the MCP layer).
A crash still leaves whole, verified events: it loses at most the calls in flight. A write
that fails stops the session's calls, since Sleuth runs nothing it cannot record.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sleuth.agent.calls import Call, CallPipeline
from sleuth.agent.evidence.lines import shown_output
from sleuth.agent.findings import REPORT_FINDING, summarise
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.session import (
    describe_hosts,
    host_groups,
    new_session_id,
    tool_specs,
    versions,
)
from sleuth.tools.approval import Approver
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import (
    Event,
    SessionEnded,
    SessionStarted,
    SessionStatus,
    Totals,
)
from sleuth.transcripts.redact import redact_data
from sleuth.transcripts.seal import Seal
from sleuth.transcripts.store import TranscriptError, TranscriptWriter

BRAIN = "mcp"
"""The `brain` a session_started names for an MCP session: the client drove it."""


class ClientInfo(BaseModel):
    """Who is calling, as the client said in its handshake."""

    name: str = "unknown"
    version: str = ""


@dataclass(frozen=True)
class CallOutcome:
    """What one call gives back to the client."""

    call_id: str
    """The id report_finding's evidence names this call by."""
    text: str
    """Exactly what `sleuth ask` would show a model: capped, redacted, a successful output's
    lines numbered (`12| `) as report_finding's `lines` cite them."""
    is_error: bool
    data: Any = None


class McpSession:
    """A client session recorded as a transcript; thread-safe."""

    def __init__(
        self,
        ctx: ToolContext,
        writer: TranscriptWriter,
        session_id: str = "",
        fleet: FleetView | None = None,
    ) -> None:
        self.writer = writer
        self.calls = CallPipeline(ctx, self._record, session_id=session_id, fleet=fleet)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._tool_calls = 0
        self._returned = 0
        self._started = time.monotonic()
        self._ended = False
        self._recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="transcript")
        self._failed: TranscriptError | None = None

    @classmethod
    def open(
        cls,
        ctx: ToolContext,
        transcripts: Path,
        client: ClientInfo,
        approval: str = "elicitation",
        seal: Seal | None = None,
    ) -> McpSession:
        """Start the transcript: session_started names the client and the hosts served. A
        `seal` signs it after each call returns (an MCP client's turn) and at its end."""
        session_id = new_session_id()
        writer = TranscriptWriter.create(transcripts, session_id, seal)
        start = SessionStarted(
            session_id=session_id,
            question=f"MCP session with {client.name} {client.version}".rstrip(),
            hosts=describe_hosts(ctx),
            brain=BRAIN,
            policy={"limits": ctx.limits.model_dump(), "approval": approval},
            versions=versions(),
            tools=tool_specs(),
            client=client.model_dump(),
            groups=host_groups(ctx),
        )
        writer.append(start)
        return cls(ctx, writer, session_id, FleetView.of(start))

    @property
    def path(self) -> Path:
        return self.writer.path

    def next_id(self) -> str:
        return f"call-{next(self._ids)}"

    def call(
        self,
        name: str,
        raw: dict[str, Any],
        approver: Approver,
        call_id: str | None = None,
        parent: str | None = None,
    ) -> CallOutcome:
        """Run one tool call (or report_finding) through the call pipeline; never raises for
        bad input. `parent`: the client's traceparent, which the call's span continues."""
        call = Call(call_id or self.next_id(), name, raw, parent)
        if self._failed is not None:
            return CallOutcome(
                call.call_id,
                f"error: not run: the session's transcript cannot be written ({self._failed}); "
                "Sleuth runs no call it cannot record. Free the disk and restart `sleuth mcp`.",
                True,
            )
        if name == REPORT_FINDING:
            with self._lock:
                turn = self._returned + 1
            outcome = self.calls.report(call, turn)
            data = redact_data(outcome.finding.model_dump(mode="json")) if outcome.finding else None
            return CallOutcome(call.call_id, outcome.feedback, outcome.is_error, data)
        with self._lock:
            self._tool_calls += 1
        result = self.calls.tool(call, self._returned_now, approver)
        self._checkpoint()
        text = shown_output(name, result.output) if result.ok else result.output
        return CallOutcome(call.call_id, text, not result.ok, result.data)

    def _returned_now(self) -> int:
        """An MCP client sees a call's output once it returns: that moment is its "turn", so
        a finding may quote only calls that had returned before it was reported."""
        with self._lock:
            self._returned += 1
            return self._returned

    def end(self, status: SessionStatus = "closed") -> None:
        """Write session_ended (once): findings still waiting for a mend are kept, ungrounded."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        self.calls.keep_unmended()
        totals = Totals(tool_calls=self._tool_calls, wall_s=time.monotonic() - self._started)
        summary = summarise(self.calls.findings)
        self._record(SessionEnded(status=status, summary=summary, totals=totals))
        self._recorder.shutdown(wait=True)
        self.writer.close()

    def _checkpoint(self) -> None:
        """A call has returned: the client's turn boundary, where a sealed transcript signs
        its head (on the recorder thread, after the call's own events)."""
        with contextlib.suppress(RuntimeError):
            self._recorder.submit(self.writer.checkpoint)

    def _record(self, event: Event) -> None:
        def write() -> None:
            try:
                self.writer.append(event)
            except TranscriptError as exc:
                self._failed = self._failed or exc

        # After the end (a client that left mid-call), nothing follows session_ended.
        with contextlib.suppress(RuntimeError):
            self._recorder.submit(write)
