"""Replay a recorded investigation through the same loop: offline, or live against today's hosts.

```python
result = replay(Path("transcripts/mtp-heads.jsonl"))          # recorded turns, recorded tools
assert result.ok and result.findings == result.recorded_findings
drift = replay(path, live_ctx=build_context(settings, ["gpu1"]))  # recorded turns, real tools
```

Offline, every tool call is answered from its `tool_executed` event, so the
loop, the grounding check and the budget run again on the recorded data. The
same calls must come in the same order with the same inputs, each
report_finding must get the answer it got, and the same findings must result;
the first difference stops the replay with a `Divergence`.

A session without model turns (`sleuth tool`, `sleuth mcp`) replays its recorded calls in
order instead (`calls_only`). Every call goes through the call pipeline, with the recorded
result and consent offline, for real live.

Live, the recorded model turns still drive the calls, but the tools run for
real. Each call whose output differs from the recording is reported with a
diff, and each recorded finding's quotes are checked against today's outputs:
a finding whose quotes are gone no longer holds (drift).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from sleuth.agent.budget import price_for
from sleuth.agent.calls import Consent, Executor, live_consent
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.history import opening_message
from sleuth.agent.loop import Investigation
from sleuth.agent.protocols import Brain
from sleuth.agent.replay.brains import CheckedBrain, ReplayBrain
from sleuth.agent.replay.calls_only import has_no_turns, replay_calls
from sleuth.agent.replay.compare import Diverged, Divergence, ReplayResult, prompt_drift
from sleuth.agent.replay.cursor import Cursor
from sleuth.agent.replay.executors import LiveTools, MemoryWriter, RecordedConsent, RecordedTools
from sleuth.agent.replay.recorded import Recorded, replayable
from sleuth.agent.replay.result import replay_result
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import Event, SessionStatus, Totals
from sleuth.transcripts.recording import Recording
from sleuth.transcripts.store import TranscriptWriter


def replay(
    source: Path | str | Recorded,
    *,
    live_ctx: ToolContext | None = None,
    brain: Brain | None = None,
    settings: Settings | None = None,
    events: list[Event] | None = None,
) -> ReplayResult:
    """Replay the transcript at `source` (a path, or one `replayable` already read).

    `live_ctx` runs the tools for real on its hosts (drift); without it the recorded results
    answer. `brain` re-drives a deterministic brain (a playbook) instead of the recorded
    turns, and its calls are checked against the recording. `events`, when given, receives
    the events the replay records (they are kept in memory, never written).
    """
    recorded = replayable(source)
    if has_no_turns(recorded) and brain is None:
        return replay_calls(recorded, live_ctx=live_ctx, events=events)
    recording = recorded.recording
    cursor = Cursor()
    live = LiveTools(cursor) if live_ctx is not None else None
    driver: Brain = (
        ReplayBrain(recording, cursor) if brain is None else CheckedBrain(brain, recording, cursor)
    )
    inv = _investigation(
        recording,
        driver,
        live_ctx or ToolContext(hosts={}),
        MemoryWriter(recorded.path, cursor, strict=live is None, events=events),
        (live, live_consent)
        if live is not None
        else (RecordedTools(cursor), RecordedConsent(recording)),
        settings,
    )
    divergence: Divergence | None = None
    status: SessionStatus
    try:
        run = inv.run()
        status, findings, totals = run.status, run.findings, run.totals
    except Diverged as stop:
        divergence = stop.divergence
        status, findings, totals = "error", inv.findings, inv.meter.snapshot()
    return replay_result(
        recorded,
        live,
        inv.grounder,
        status=status,
        findings=findings,
        divergence=divergence,
        turns=totals.turns,
        wall_s=totals.wall_s,
        prompt_drift=prompt_drift(recording.start),
    )


def _investigation(
    recording: Recording,
    brain: Brain,
    ctx: ToolContext,
    writer: TranscriptWriter,
    answers: tuple[Executor, Consent],
    settings: Settings | None,
) -> Investigation:
    start = recording.start
    settings = settings or Settings()
    try:
        budget = Budget.model_validate(start.budget)
    except ValidationError:
        budget = settings.budget
    # The wall clock is the one budget a replay cannot reproduce; the recorded turns end it.
    budget.max_wall_s = float("inf")
    return Investigation(
        brain=brain,
        ctx=ctx,
        writer=writer,
        system="",
        tools=start.tools,
        messages=[opening_message(start.question, start.hosts, start.groups)],
        budget=budget,
        question=start.question,
        hosts=start.hosts,
        price=price_for(start.model, settings.prices),
        totals=Totals(),
        executor=answers[0],
        consent=answers[1],
        fleet=FleetView.of(start),
    )
