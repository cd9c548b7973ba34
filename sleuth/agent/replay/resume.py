"""Continue an interrupted investigation from its last complete turn.

```python
inv = resume_investigation(Path("transcripts/x.jsonl"), ctx, settings)
result = inv.run()          # appends to the same transcript, chain unbroken
```

The transcript must verify (a tampered trail, or one with events after its end, is not
continued) and must not have ended. A torn last line (the run died mid-event) is cut off and
the repair recorded as a `repaired` event. The conversation is rebuilt from the events, the
brain from `session_started` as it was recorded (`rebuild.py`; today's API keys from the
environment), and the budget goes on from what the recorded turns already spent. A turn cut
off mid-way is run again. A second `session_started` with `resumed_from` marks where the run
was picked up, with the hosts, versions and brain as they are now.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.budget import price_for
from sleuth.agent.findings import REPORT_FINDING, CallRecord
from sleuth.agent.history import messages_from_events
from sleuth.agent.loop import Investigation
from sleuth.agent.protocols import Brain, Observer, Quiet
from sleuth.agent.replay.rebuild import ResumeError, rebuild_brain
from sleuth.agent.replay.recorded import NotVerified, Recorded, read_recorded
from sleuth.agent.session import brain_options, describe_hosts, versions
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ErrorEvent, SessionStarted, SignatureEvent
from sleuth.transcripts.recording import Recording
from sleuth.transcripts.seal import SIGNING, Seal
from sleuth.transcripts.store import TranscriptWriter

UNSIGNED_RESUME = (
    "signing stopped: the run was signed, and is resumed without a key (none found, or "
    "--no-sign); the events from here on are not signed"
)


def resumable(source: Path | Recorded) -> Recorded:
    """The transcript to continue, read once (or as already read); ResumeError unless it
    verifies and has not ended."""
    if isinstance(source, Recorded):
        recorded = source
    else:
        path = Path(source)
        try:
            recorded = read_recorded(path)
        except NotVerified as exc:
            first = exc.report.problems[0]
            raise ResumeError(
                f"{path} fails verification at line {first.line} ({first.kind}: "
                f"{first.message}); a tampered trail is not continued. See `sleuth verify {path}`."
            ) from exc
    if recorded.report.ended:
        raise ResumeError(
            f"{recorded.path} already ended (it has a session_ended event); there is nothing to "
            f"resume. Run `sleuth ask` again for a new investigation."
        )
    return recorded


def resume_investigation(
    source: Path | Recorded,
    ctx: ToolContext,
    settings: Settings,
    *,
    brain: Brain | None = None,
    observer: Observer | None = None,
    env: Mapping[str, str] | None = None,
    seal: Seal | None = None,
) -> Investigation:
    """An Investigation that goes on from the last complete turn of the transcript at `source`
    (a path, or one `resumable` already read); `brain` as `rebuild_brain` built it (else it is
    built here from the record), `seal` to sign what the resumed run appends."""
    recorded = resumable(source)
    recording = recorded.recording
    start = recording.start
    brain = brain or rebuild_brain(start, settings, env=env)[0]
    writer = TranscriptWriter.reopen(recorded.path, recorded.loaded, seal)
    signed = any(isinstance(e, SignatureEvent) for e in recorded.events)
    if signed and (seal is None or seal.signer is None):
        # Said in the file, so `verify` reads the unsigned rest as a choice, not as tampering.
        writer.append(ErrorEvent(where=SIGNING, message=UNSIGNED_RESUME))
    writer.append(
        start.model_copy(
            update={
                "hosts": describe_hosts(ctx),
                "brain": brain.name,
                "model": brain.model,
                "brain_options": brain_options(brain),
                "versions": versions(),
                "resumed_from": str(recorded.path),
            }
        )
    )
    inv = Investigation(
        brain=brain,
        ctx=ctx,
        writer=writer,
        system=system_prompt(),
        tools=start.tools,
        messages=messages_from_events(recorded.events),
        budget=_budget(start, settings),
        question=start.question,
        hosts=start.hosts,
        price=price_for(brain.model, settings.prices),
        observer=observer or Quiet(),
        findings=recording.findings,
        totals=recording.totals,
    )
    _restore_outputs(inv, recording)
    inv.final_reason = recording.budget_notice
    # The notices for calls written as text are a per-run budget, not per process.
    inv.notices = sum(1 for turn in recording.turns if turn.output_notice)
    return inv


def _budget(start: SessionStarted, settings: Settings) -> Budget:
    try:
        return Budget.model_validate(start.budget)
    except ValidationError:
        return settings.budget


def _restore_outputs(inv: Investigation, recording: Recording) -> None:
    """The grounding check and scripted brains need the outputs of the turns already run."""
    for turn in recording.turns:
        for call_id, event in turn.results.items():
            if event.tool != REPORT_FINDING:
                inv.grounder.record(
                    CallRecord(
                        call_id,
                        event.tool,
                        event.input,
                        event.result.output,
                        event.result.ok,
                        turn.event.turn,
                    )
                )
                inv.tool_data[call_id] = event.result.data
