"""A replay's `ReplayResult`: what it ran, held against what was recorded.

```python
return replay_result(recorded, live, grounder, status=status, findings=findings,
                     divergence=divergence, turns=turns, wall_s=wall_s)
```

Both replays (an investigation's through the loop, a calls-only session's through the call
pipeline) end here, so they judge the same way.
"""

from __future__ import annotations

from sleuth.agent.findings import Grounder
from sleuth.agent.replay.compare import (
    Divergence,
    PromptDrift,
    ReplayResult,
    ending_divergence,
    recheck_findings,
)
from sleuth.agent.replay.executors import LiveTools
from sleuth.agent.replay.recorded import Recorded
from sleuth.transcripts.events import Finding, SessionStatus


def replay_result(
    recorded: Recorded,
    live: LiveTools | None,
    grounder: Grounder,
    *,
    status: SessionStatus,
    findings: list[Finding],
    divergence: Divergence | None,
    turns: int,
    wall_s: float,
    prompt_drift: list[PromptDrift] | None = None,
) -> ReplayResult:
    """Offline, a replay that did not diverge on the way is held to the recorded end (its
    findings, then its status); live (`live` ran the calls), each call's output and each
    recorded finding's quotes are checked against today's."""
    recording = recorded.recording
    if divergence is None and live is None:
        divergence = ending_divergence(recording, status, findings)
    return ReplayResult(
        transcript=str(recorded.path),
        verdict=recorded.report.verdict,
        headline=recorded.report.headline,
        mode="offline" if live is None else "live",
        status=status,
        recorded_status=recording.status,
        turns=turns,
        recorded_turns=len(recording.turns),
        findings=findings,
        recorded_findings=recording.findings,
        divergence=divergence,
        calls=live.report() if live else [],
        finding_drift=recheck_findings(recording.findings, live.today(grounder)) if live else [],
        prompt_drift=prompt_drift or [],
        wall_s=wall_s,
    )
