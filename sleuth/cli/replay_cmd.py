"""`sleuth replay` and `sleuth resume`: run a recorded investigation again, or finish it."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import Annotated

import typer
from rich.table import Table

from sleuth.agent.protocols import BrainError
from sleuth.agent.replay.compare import ReplayResult
from sleuth.agent.replay.rebuild import (
    BrainOverrides,
    ResumeError,
    rebuild_brain,
    recorded_limits,
)
from sleuth.agent.replay.recorded import Recorded, ReplayError, replayable
from sleuth.agent.replay.resume import resumable, resume_investigation
from sleuth.agent.replay.run import replay
from sleuth.agent.view import LiveView
from sleuth.cli.ask_cmd import (
    EXIT_FOR_STATUS,
    BaseUrl,
    FirstToolChoice,
    MaxTokens,
    ModelName,
    show,
)
from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    ApproveFlag,
    Pause,
    TranscriptFile,
    approver,
    console,
    escape,
    fail,
    plural,
    print_json,
    say,
)
from sleuth.cli.sealing import say_warnings, signing_of
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import LOCAL, Settings
from sleuth.outputs import ReplayOutput
from sleuth.tools.context import ToolContext
from sleuth.transcripts.controls import shown
from sleuth.transcripts.ledger import LedgerError
from sleuth.transcripts.store import TranscriptError


def _context(
    recorded: Recorded,
    settings: Settings,
    opts: SharedOptions,
    yes: bool,
    interactive: bool,
    pause: Pause = nullcontext,
) -> ToolContext:
    """Today's hosts, by the names the recording used."""
    names = [h.name for h in recorded.recording.start.hosts if h.name != LOCAL]
    return opts.open_hosts(settings, names, approver(yes, interactive, pause))


@shared_options("accept_new_host_key", "as_json", "config")
def replay_cmd(
    transcript: TranscriptFile,
    live: Annotated[
        bool,
        typer.Option("--live", help="Run the tools for real on today's hosts and report drift."),
    ] = False,
    *,
    opts: SharedOptions,
) -> None:
    """Run a recorded investigation again; exit 1 at the first divergence (or any drift).

    `sleuth verify`'s verdict comes first (against [sign] allowed_signers and the ledger); a
    transcript it fails is not replayed. Offline, the recorded model turns and tool results
    drive the same loop: the same calls and findings must come. With --live the tools run on
    today's hosts and each changed output and each finding that no longer holds is reported.
    Example: sleuth replay transcripts/20261129T093012Z-ab12.jsonl --live
    """
    settings = opts.settings()
    try:
        recorded = replayable(transcript, opts.anchors(settings))
    except (ReplayError, TranscriptError, LedgerError) as exc:
        fail(str(exc))
    if not opts.as_json:
        say(recorded.report.headline)
    ctx = None
    if live:
        ctx = _context(recorded, settings, opts, False, False)
    try:
        result = replay(recorded, live_ctx=ctx)
    except (ReplayError, TranscriptError) as exc:
        fail(str(exc))
    finally:
        if ctx is not None:
            ctx.close()
    if opts.as_json:
        print_json(ReplayOutput.model_validate(result.model_dump()))
    else:
        _print_replay(result)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_ERROR)


def _print_replay(result: ReplayResult) -> None:
    name = escape(result.transcript)
    if result.divergence is not None:
        console.print(f"[bold red]DIVERGED[/] {name}", highlight=False)
        console.print(shown(result.divergence.describe()), markup=False, highlight=False)
    for drift in result.prompt_drift:
        console.print(
            f"[yellow]note:[/] the {drift.part} changed since this was recorded: a model would "
            "be asked differently today (the recorded turns still replay).",
            highlight=False,
        )
    if result.mode == "live":
        _print_drift(result)
    if result.ok:
        console.print(
            f"[bold green]SAME[/] {name}: {plural(result.turns, 'turn')}, "
            f"{plural(len(result.findings), 'finding')} "
            f"as recorded ({result.mode}, {result.wall_s * 1000:.0f} ms).",
            highlight=False,
        )


def _print_drift(result: ReplayResult) -> None:
    table = Table("step", "call", "tool", "host", "output", title="Calls, today vs recorded")
    for call in result.calls:
        table.add_row(
            str(call.step),
            escape(call.call_id),
            escape(call.tool),
            escape(call.host),
            "same" if call.same else "[red]DIFFERS[/]",
        )
    console.print(table)
    for call in result.calls:
        if not call.same:
            console.print(
                f"[bold]{escape(call.call_id)}[/] ({escape(f'{call.tool} on {call.host}')}):"
            )
            console.print(shown(call.diff), markup=False, highlight=False)
    for drift in result.finding_drift:
        if not drift.was_grounded:
            verdict = "[yellow]was ungrounded when recorded[/]"
        else:
            verdict = "[green]still holds[/]" if drift.holds else "[bold red]NO LONGER HOLDS[/]"
        console.print(f"finding: {escape(drift.claim)}: {verdict}")
        for check in drift.quotes:
            if not check.grounded:
                what = f"lines {check.lines}" if check.lines else f"quote {check.quote!r}"
                console.print(
                    shown(
                        f"  {what} of {check.call_id} no longer grounds it ({check.failure}): "
                        f"{check.why}"
                    ),
                    markup=False,
                )
    if result.drifted:
        console.print("[bold red]DRIFT[/]: today's hosts no longer match the recording.")


@shared_options("accept_new_host_key", "no_sign", "as_json", "config")
def resume_cmd(
    transcript: TranscriptFile,
    yes: ApproveFlag = False,
    model: ModelName = None,
    base_url: BaseUrl = None,
    max_tokens: MaxTokens = None,
    tool_choice: FirstToolChoice = None,
    trust_unsigned: Annotated[
        bool,
        typer.Option(
            "--trust-unsigned",
            help="Go on even though no allowed signature vouches for the events already "
            "recorded; the transcript records it, and verify counts them as unsigned.",
        ),
    ] = False,
    *,
    opts: SharedOptions,
) -> None:
    """Continue an interrupted investigation from its last complete turn, in the same file.

    `sleuth verify`'s verdict comes first; a transcript it fails is not continued, nor one
    whose events no allowed signature (or the key signing now) vouches for, unless
    --trust-unsigned. The brain, its options and the limits are the recorded ones, not the
    defaults the flags name; a flag given here wins, and each difference from today's
    settings is said before the run goes on.
    Example: sleuth resume transcripts/20261129T093012Z-ab12.jsonl
    """
    try:
        recorded = resumable(transcript, opts.anchors(opts.settings()))
    except (ResumeError, TranscriptError, LedgerError) as exc:
        fail(str(exc))
    say(recorded.report.headline)
    start = recorded.recording.start
    settings, notes = recorded_limits(start, opts.settings())
    overrides = BrainOverrides(model, base_url, max_tokens, tool_choice)
    try:
        brain, brain_notes = rebuild_brain(start, settings, overrides)
    except ResumeError as exc:
        fail(str(exc))
    except BrainError as exc:
        fail(str(exc), EXIT_USAGE)
    for note in [*brain_notes, *notes]:
        say(f"note: {note}")
    interactive = sys.stdin.isatty() and not opts.as_json
    view = opts.view()
    pause = view.paused if isinstance(view, LiveView) else nullcontext
    ctx = _context(recorded, settings, opts, yes, interactive, pause)
    warnings: list[str] = []
    try:
        seal = opts.seal(settings)
        warnings = seal.warnings
        inv = resume_investigation(
            recorded,
            ctx,
            settings,
            brain=brain,
            observer=view,
            seal=seal,
            trust_unsigned=trust_unsigned,
        )
        with view:
            result = inv.run()
    except (ResumeError, TranscriptError) as exc:
        fail(str(exc))
    except BrainError as exc:
        fail(str(exc), EXIT_USAGE)
    finally:
        ctx.close()
        say_warnings(warnings)
    show(result, inv.brain.name, opts.as_json, signing_of(seal, settings))
    raise typer.Exit(EXIT_FOR_STATUS.get(result.status, EXIT_ERROR))
