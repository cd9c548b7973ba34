"""Replay a session without model turns (`sleuth tool`, `sleuth mcp`): its calls are the script.

```python
result = replay_calls(recorded)                     # offline: the recording answers each call
drift = replay_calls(recorded, live_ctx=ctx)        # live: each call runs on today's hosts
```

Each recorded call goes through the call pipeline again, in order, as the session made it:
offline with the recorded result and the recorded consent, live with today's hosts and the
replay's approver. Every report_finding is checked again by the same grounding check: offline
each must get the answer it got and the same findings must come, or the first difference is
the `Divergence`; live, each changed output and each finding that no longer holds is drift.
A call's "turn" is as `sleuth mcp` counts it: the calls returned before it. A fleet call's
recorded parts (one per host) answer its hosts' calls again; they are not calls of their own.
"""

from __future__ import annotations

import time

from sleuth.agent.calls import Call, CallPipeline, live_consent
from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.replay.compare import Diverged, Divergence, ReplayResult, report_changed
from sleuth.agent.replay.cursor import Cursor, fleet_parts
from sleuth.agent.replay.executors import LiveTools, RecordedConsent, RecordedTools
from sleuth.agent.replay.recorded import Recorded
from sleuth.agent.replay.result import replay_result
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import Event


def has_no_turns(recorded: Recorded) -> bool:
    """A session that made calls and no model turns (a person's or an MCP client's)."""
    recording = recorded.recording
    return not recording.turns and bool(recording.calls)


def replay_calls(
    recorded: Recorded,
    *,
    live_ctx: ToolContext | None = None,
    events: list[Event] | None = None,
) -> ReplayResult:
    """Replay the recorded calls of `recorded`; `events` receives what the replay records."""
    began = time.monotonic()
    recording = recorded.recording
    cursor = Cursor()
    live = LiveTools(cursor) if live_ctx is not None else None
    events = [] if events is None else events
    pipeline = CallPipeline(
        live_ctx or ToolContext(hosts={}),
        events.append,
        executor=live if live is not None else RecordedTools(cursor),
        consent=live_consent if live is not None else RecordedConsent(recording),
        fleet=FleetView.of(recording.start),
    )
    parts = fleet_parts(recording.calls)
    divergence: Divergence | None = None
    returned = 0
    try:
        for step, event in enumerate(c for c in recording.calls if c.fleet is None):
            call = Call(event.call_id, event.tool, event.input)
            if event.tool != REPORT_FINDING:
                cursor.hold(event, step + 1, parts.get(event.call_id, []))
                returned += 1
                pipeline.tool(call, returned)
                continue
            outcome = pipeline.report(call, returned + 1)
            if live is None and outcome.feedback != event.result.output:
                raise Diverged(
                    report_changed(step + 1, call.call_id, event.result.output, outcome.feedback)
                )
    except Diverged as stop:
        divergence = stop.divergence
    pipeline.keep_unmended()
    return replay_result(
        recorded,
        live,
        pipeline.grounder,
        status=recording.status or "interrupted",
        findings=pipeline.findings,
        divergence=divergence,
        turns=0,
        wall_s=time.monotonic() - began,
    )
