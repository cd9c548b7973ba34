"""Replay an MCP session's transcript: it has no model turns, so its recorded calls are the script.

```python
result = replay_session(path)                       # offline: the recording answers each call
drift = replay_session(path, live_ctx=ctx)          # live: each call runs on today's hosts
```

Offline, each recorded output is fed back in order and every report_finding is checked again
by the same grounding check: each must get the answer it got and the same findings must come,
or the first difference is the `Divergence`. Live, each tool call runs again and its output is
compared with the recording, and each recorded finding's quotes are checked against today's
outputs. The result is agent/replay.py's `ReplayResult`, so `sleuth replay` reports it the
same way.
"""

from __future__ import annotations

import time
from pathlib import Path

from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder
from sleuth.agent.replay import (  # the one recheck and diff a replay uses (agent/replay.py)
    CallDrift,
    Divergence,
    ReplayError,
    ReplayResult,
    _diff,
    _recheck,
)
from sleuth.mcp.session import BRAIN
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import execute
from sleuth.transcripts.events import (
    Finding,
    FindingEvent,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.redact import redact
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import not_verified, verify


def is_mcp_session(path: Path) -> bool:
    """Whether the transcript at `path` records a `sleuth mcp` session."""
    events = load(path).events
    return bool(events) and isinstance(events[0], SessionStarted) and events[0].brain == BRAIN


def replay_session(path: Path | str, *, live_ctx: ToolContext | None = None) -> ReplayResult:
    path = Path(path)
    began = time.monotonic()
    banner = not_verified(verify(path))
    if banner is not None:
        raise ReplayError(f"{path}: {banner} A replay of an edited transcript proves nothing.")
    events = load(path).events
    if not events or not isinstance(events[0], SessionStarted):
        raise ReplayError(f"{path} has no session_started event; it cannot be replayed")
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
                divergence = _report_changed(step, call, outcome.feedback)
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
                    diff=_diff(call.output, output, "recorded", "today"),
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
        finding_drift=_recheck(recorded, today) if live_ctx is not None else [],
        wall_s=time.monotonic() - began,
    )


def _report_changed(step: int, call: ToolExecuted, feedback: str) -> Divergence:
    return Divergence(
        kind="report",
        step=step,
        call_id=call.call_id,
        tool=call.tool,
        expected=call.output,
        actual=feedback,
        diff=_diff(call.output, feedback, "recorded", "replayed"),
        message="report_finding got a different answer from the grounding check than it got "
        "when recorded",
    )
