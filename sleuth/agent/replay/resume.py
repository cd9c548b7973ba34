"""Continue an interrupted investigation from its last complete turn.

```python
inv = resume_investigation(Path("transcripts/x.jsonl"), ctx, settings)
result = inv.run()          # appends to the same transcript, chain unbroken
```

The transcript must pass `sleuth verify`'s own verdict against the configured allowed signers
and ledger (a tampered trail, or one with events after its end, is not continued) and must not
have ended. A resumed run signs what it appends, so it goes on only from events that an allowed
signature (or the resuming key's own) vouches for: otherwise it refuses, or, with
`--trust-unsigned`, goes on and records why in its `session_started`; its own signatures never
vouch for the events before it (`signatures.py`). A torn last line (the run died mid-event) is cut
off and the repair recorded as a `repaired` event. The conversation is rebuilt from the events, the
brain from `session_started` as it was recorded (`rebuild.py`; today's API keys from the
environment), and the budget goes on from what the recorded turns already spent. A turn cut off
mid-way is run again. A second `session_started` with `resumed_from` marks where the run was
picked up, with the hosts, versions and brain as they are now.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.budget import price_for
from sleuth.agent.findings import REPORT_FINDING, CallRecord
from sleuth.agent.fleet.normalise import Masker
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.history import messages_from_events
from sleuth.agent.loop import Investigation
from sleuth.agent.protocols import Brain, Observer, Quiet
from sleuth.agent.replay.rebuild import ResumeError, rebuild_brain
from sleuth.agent.replay.recorded import NotVerified, Recorded, read_recorded
from sleuth.agent.session import brain_options, describe_hosts, host_groups, versions
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ErrorEvent, SessionStarted, SignatureEvent
from sleuth.transcripts.recording import Recording
from sleuth.transcripts.seal import SIGNING, Seal
from sleuth.transcripts.sign import fingerprint
from sleuth.transcripts.store import TranscriptWriter
from sleuth.transcripts.verify import Anchors

UNSIGNED_RESUME = (
    "signing stopped: the run was signed, and is resumed without a key (none found, or "
    "--no-sign); the events from here on are not signed"
)


def resumable(source: Path | Recorded, against: Anchors | None = None) -> Recorded:
    """The transcript to continue, read once (or as already read); ResumeError unless it
    verifies (against `against`, as `sleuth verify` would) and has not ended."""
    if isinstance(source, Recorded):
        recorded = source
    else:
        path = Path(source)
        try:
            recorded = read_recorded(path, against)
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


def unvouched(recorded: Recorded, seal: Seal | None, trust_unsigned: bool) -> str | None:
    """Why no signature vouches for every recorded event (None when they are vouched for:
    by an allowed signer, or by the key that will sign the rest); ResumeError for that unless
    `trust_unsigned`, since the resumed run would otherwise sign on from what it never
    checked."""
    report = recorded.report
    own = fingerprint(seal.signer.public_blob) if seal and seal.signer else None
    trusted = all(s.principals or s.fingerprint == own for s in report.signers)
    if report.signers and trusted and report.signed_events == report.events:
        return None
    why = (
        report.integrity_only
        if report.signed_events < report.events or not report.signers
        else "signed by a key that is neither in the allowed signers nor the one signing now"
    )
    if trust_unsigned:
        return f"events 0-{report.events - 1} were not checked ({why})"
    raise ResumeError(
        f"{recorded.path}: no allowed signature vouches for every event already recorded "
        f"({why}); a resumed run would go on from, and sign after, events nobody checked. "
        "Set [sign] allowed_signers in sleuth.toml to check who signed them, or resume with "
        "--trust-unsigned to go on anyway: the transcript records it, and `sleuth verify` "
        "then counts those events as unsigned."
    )


def resume_investigation(
    source: Path | Recorded,
    ctx: ToolContext,
    settings: Settings,
    *,
    brain: Brain | None = None,
    observer: Observer | None = None,
    env: Mapping[str, str] | None = None,
    seal: Seal | None = None,
    trust_unsigned: bool = False,
) -> Investigation:
    """An Investigation that goes on from the last complete turn of the transcript at `source`
    (a path, or one `resumable` already read); `brain` as `rebuild_brain` built it (else it is
    built here from the record), `seal` to sign what the resumed run appends;
    `trust_unsigned` goes on from events no allowed signature vouches for (`unvouched`)."""
    recorded = resumable(source)
    unchecked = unvouched(recorded, seal, trust_unsigned)
    recording = recorded.recording
    start = recording.start
    brain = brain or rebuild_brain(start, settings, env=env)[0]
    segment = start.model_copy(
        update={
            "hosts": describe_hosts(ctx),
            "brain": brain.name,
            "model": brain.model,
            "brain_options": brain_options(brain),
            "versions": versions(),
            "resumed_from": str(recorded.path),
            "prefix_unchecked": unchecked,
            "groups": host_groups(ctx),
        }
    )
    writer = TranscriptWriter.reopen(recorded.path, recorded.loaded, seal, opening=segment)
    signed = any(isinstance(e, SignatureEvent) for e in recorded.events)
    if signed and (seal is None or seal.signer is None):
        # Said in the file, so `verify` reads the unsigned rest as a choice, not as tampering.
        writer.append(ErrorEvent(where=SIGNING, message=UNSIGNED_RESUME))
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
        fleet=FleetView.of(segment),
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
    hosts = {h.name: h for h in recording.start.hosts}
    for turn in recording.turns:
        for call_id, event in turn.results.items():
            if event.tool != REPORT_FINDING:
                output = event.result.output
                inv.grounder.record(
                    CallRecord(
                        call_id,
                        event.tool,
                        event.input,
                        output,
                        event.result.ok,
                        turn.event.turn,
                        mask=Masker.for_host(hosts.get(event.host), event.host)
                        if event.fleet
                        else None,
                        fleet_call=event.fleet or "",
                    )
                )
                inv.tool_data[call_id] = event.result.data
