"""`sleuth ask`: one question, answered by an investigation on the named hosts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.prompt import Confirm

from sleuth.agent.brains import select_brain
from sleuth.agent.loop import RunResult
from sleuth.agent.protocols import BrainError, Quiet
from sleuth.agent.session import start_investigation
from sleuth.agent.view import LiveView, findings_table
from sleuth.cli.common import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    ConfigOption,
    JsonOption,
    console,
    err_console,
    fail,
    print_json,
    settings_or_exit,
)
from sleuth.cli.servers_cmd import launched_by_run, print_left_running
from sleuth.config import ConfigError
from sleuth.tools.connect import build_context
from sleuth.tools.policy import ApprovalDecision, ApprovalRequest, Approver

HostsOption = typer.Option(None, "--host", "-H", help="Host to investigate (repeat).")
TranscriptsOption = typer.Option(
    Path("transcripts"), "--transcripts", help="Folder the transcript is written to."
)
EXIT_FOR_STATUS = {"answered": EXIT_OK, "budget_exhausted": EXIT_BUDGET, "refused": EXIT_BUDGET}


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)


def approver_for(yes: bool, interactive: bool) -> Approver:
    """--yes approves; a terminal asks; otherwise a refusal that names --yes."""

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        if yes:
            return ApprovalDecision(approved=True, by="--yes")
        if interactive:
            ok = Confirm.ask(
                f"Allow [bold]{request.tool}[/] on host [bold]{request.host}[/] "
                f"with {request.input}?",
                console=err_console,
                default=False,
            )
            return ApprovalDecision(
                approved=ok, by="interactive", reason="" if ok else "declined at the prompt"
            )
        return ApprovalDecision(
            approved=False,
            by="non-interactive",
            reason=f"no terminal to ask on; rerun with --yes to approve {request.tool}",
        )

    return approve


def ask(
    question: str = typer.Argument(..., help="The question, in plain words."),
    hosts: list[str] = HostsOption,
    model: str | None = typer.Option(None, "--model", help="Model name for the brain."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="An OpenAI-compatible endpoint, e.g. http://gpu1:30000/v1."
    ),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, help="Budget: model turns."),
    yes: bool = typer.Option(False, "--yes", help="Approve tools that change a host."),
    accept_new_host_key: bool = typer.Option(
        False, "--accept-new-host-key", help="Trust and store an unknown SSH host key."
    ),
    transcripts: Path = TranscriptsOption,
    as_json: bool = JsonOption,
    config: Path | None = ConfigOption,
) -> None:
    """Investigate QUESTION with tools on the hosts and print grounded findings.

    Example: sleuth ask "does /models/ckpt carry its MTP heads?" --host gpu1
    """
    settings = settings_or_exit(config)
    if max_turns is not None:
        settings.budget.max_turns = max_turns
    interactive = sys.stdin.isatty() and not as_json
    try:
        brain = select_brain(settings, base_url, model)
        ctx = build_context(
            settings,
            hosts or [],
            approver=approver_for(yes, interactive),
            accept_new_host_key=accept_new_host_key,
        )
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    except BrainError as exc:
        fail(str(exc), EXIT_USAGE)
    mode = "--yes" if yes else "interactive" if interactive else "deny"
    view: Quiet | LiveView = Quiet() if as_json else LiveView(err_console)
    tool_data: dict[str, Any] = {}
    try:
        inv = start_investigation(
            question, brain, ctx, settings, transcripts, observer=view, approval_mode=mode
        )
        tool_data = inv.tool_data
        with view:
            result = inv.run()
    finally:
        # Ended or interrupted: say which servers the run left running (issue 18.9).
        print_left_running(launched_by_run(ctx, tool_data))
        ctx.close()
    show(result, brain.name, as_json)
    raise typer.Exit(EXIT_FOR_STATUS.get(result.status, EXIT_ERROR))


def show(result: RunResult, brain: str, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "status": result.status,
                "brain": brain,
                "answer": result.answer,
                "findings": [f.model_dump(mode="json") for f in result.findings],
                "totals": result.totals.model_dump(mode="json"),
                "transcript": result.transcript,
            }
        )
        return
    if result.findings:
        console.print(findings_table(result.findings))
    if result.answer:
        console.print(result.answer, markup=False, highlight=False)
    t = result.totals
    console.print(
        f"[bold]{result.status}[/] by {brain}: {t.turns} turns, {t.tool_calls} tool calls, "
        f"{t.input_tokens:,} in / {t.output_tokens:,} out tokens, ${t.cost_usd:.4f}, "
        f"{t.wall_s:.1f} s. Transcript: {result.transcript}",
        highlight=False,
    )
