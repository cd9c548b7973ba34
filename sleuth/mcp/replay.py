"""Replay an MCP session's transcript: it has no model turns, so its recorded calls are the script.

```python
result = replay_session(path)                       # offline: the recording answers each call
drift = replay_session(path, live_ctx=ctx)          # live: each call runs on today's hosts
```

Offline, each recorded output is fed back in order and every report_finding is checked again
by the same grounding check: each must get the answer it got and the same findings must come,
or the first difference is the `Divergence`. Live, each tool call runs again and its output is
compared with the recording, and each recorded finding's quotes are checked against today's
outputs. The result is agent/replay/compare.py's `ReplayResult`, so `sleuth replay` reports it
the same way.
"""

from __future__ import annotations

import time
from pathlib import Path

from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder
from sleuth.agent.replay.compare import (
    CallDrift,
    Divergence,
    ReplayResult,
    capped_diff,
    recheck_findings,
    report_changed,
)
from sleuth.agent.replay.recorded import Recorded, replayable
from sleuth.mcp.session import BRAIN
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import execute
from sleuth.transcripts.events import Finding, FindingEvent, SessionEnded, ToolExecuted
from sleuth.transcripts.redact import redact


def is_mcp_session(recorded: Recorded) -> bool:
    """Whether the transcript records a `sleuth mcp` session."""
    return recorded.recording.start.brain == BRAIN


def replay_session(
    source: Path | str | Recorded, *, live_ctx: ToolContext | None = None
) -> ReplayResult:
    """Replay the MCP session at `source` (a path, or one `replayable` already read)."""
    began = time.monotonic()
    read = replayable(source)
    path, events = read.path, read.events
    recorded = [e.finding for e in events if isinstance(e, FindingEvent)]
    ended = next((e.status for e in events if isinstance(e, SessionEnded)), None)
    grounder = Grounder()
    findings: list[Finding] = []
    drift: list[CallDrift] = []
    today: dict[str, CallRecord] = {}
    returned = 0
    divergence: Divergence | None = None
    calls = [e for e in events if isinstance(e, ToolExecuted)]
    for step, call in enumerate(calls, 1):
        if call.tool == REPORT_FINDING:
            outcome = grounder.report(call.call_id, call.input, returned + 1)
            findings += [outcome.finding] if outcome.finding else []
            if live_ctx is None and outcome.feedback != call.output and divergence is None:
                divergence = report_changed(step, call.call_id, call.output, outcome.feedback)
            continue
        output, ok = call.output, call.ok
        if live_ctx is not None:
            result = execute(live_ctx, call.tool, call.input)
            output, ok = redact(result.output), result.ok
            drift.append(
                CallDrift(
                    step=step,
                    call_id=call.call_id,
                    tool=call.tool,
                    host=call.host,
                    same=output == call.output,
                    recorded_ok=call.ok,
                    ok=result.ok,
                    diff=capped_diff(call.output, output, "recorded", "today"),
                )
            )
        returned += 1
        record = CallRecord(call.call_id, call.tool, call.input, output, ok, returned)
        if live_ctx is not None:
            today[call.call_id] = record
        grounder.record(record)
    findings += [finding for _, finding in grounder.unmended()]
    if live_ctx is None and divergence is None and findings != recorded:
        divergence = Divergence(
            kind="findings",
            step=0,
            expected=[f.model_dump(mode="json") for f in recorded],
            actual=[f.model_dump(mode="json") for f in findings],
            message=f"the replay produced {len(findings)} findings where the recording has "
            f"{len(recorded)}, or they differ",
        )
    return ReplayResult(
        transcript=str(path),
        mode="offline" if live_ctx is None else "live",
        status=ended or "interrupted",
        recorded_status=ended,
        turns=0,
        recorded_turns=0,
        findings=findings,
        recorded_findings=recorded,
        divergence=divergence,
        calls=drift,
        finding_drift=recheck_findings(recorded, today) if live_ctx is not None else [],
        wall_s=time.monotonic() - began,
    )
