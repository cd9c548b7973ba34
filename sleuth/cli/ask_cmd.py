"""`sleuth ask`: one question, answered by an investigation on the named hosts."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.brains.select import describe_brain, select_brain
from sleuth.agent.budget import price_or_refuse, untracked_cost_note
from sleuth.agent.loop import UNSUPPORTED_NOTE, RunResult
from sleuth.agent.protocols import Brain, BrainError, Quiet
from sleuth.agent.session import start_investigation
from sleuth.agent.view import LiveView, findings_table
from sleuth.cli.common import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    ApproveFlag,
    FleetConcurrency,
    HostNames,
    HostSpecs,
    Tracing,
    approver,
    console,
    escape,
    fail,
    plural,
    print_json,
    say,
    select_or_exit,
)
from sleuth.cli.sealing import say_warnings, signing_of
from sleuth.cli.servers_cmd import launched_by_run, print_left_running
from sleuth.cli.shared_options import EVERY_OPTION, SharedOptions, shared_options
from sleuth.config import ConfigError, ModelPrice, Provider, Settings, ToolChoice
from sleuth.outputs import AskOutput
from sleuth.tools.context import ToolContext
from sleuth.transcripts.controls import shown
from sleuth.transcripts.seal import Seal, Signing

EXIT_FOR_STATUS = {
    "answered": EXIT_OK,
    "budget_exhausted": EXIT_BUDGET,
    "refused": EXIT_BUDGET,
    "unsupported": EXIT_BUDGET,
}


# The options of `ask`; `resume` takes its brain options (--model to --tool-choice) too.
Question = Annotated[str, typer.Argument(help="The question, in plain words.")]
ProviderName = Annotated[
    Provider | None,
    typer.Option(
        "--provider",
        help="Brain: anthropic, openai (any OpenAI-compatible server) or playbook "
        "(offline). Default: by the keys and URLs configured.",
    ),
]
ModelName = Annotated[str | None, typer.Option("--model", help="Model name for the brain.")]
BaseUrl = Annotated[
    str | None,
    typer.Option("--base-url", help="An OpenAI-compatible endpoint, e.g. http://gpu1:30000/v1."),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=1,
        help="Output tokens per model turn (default 4096; resume: the recorded number).",
    ),
]
FirstToolChoice = Annotated[
    ToolChoice | None,
    typer.Option(
        "--tool-choice",
        help="OpenAI-compatible servers: required asks for a tool call on the first turn "
        "(auto after), for small models that would otherwise only talk.",
    ),
]
MaxTurns = Annotated[int | None, typer.Option("--max-turns", min=1, help="Budget: model turns.")]
MaxToolCalls = Annotated[
    int | None, typer.Option("--max-tool-calls", min=1, help="Budget: tool calls.")
]
MaxCost = Annotated[
    float | None, typer.Option("--max-cost", min=0.0, help="Budget: USD; the model needs a price.")
]
MaxWall = Annotated[
    float | None, typer.Option("--max-wall", min=1.0, help="Budget: wall-clock seconds.")
]
PriceInput = Annotated[
    float | None,
    typer.Option("--price-input", min=0.0, help="USD per million input tokens for --model."),
]
PriceOutput = Annotated[
    float | None,
    typer.Option("--price-output", min=0.0, help="USD per million output tokens for --model."),
]


@shared_options(*EVERY_OPTION)
def ask(
    question: Question,
    hosts: HostNames = None,
    fleet: HostSpecs = None,
    fleet_concurrency: FleetConcurrency = None,
    provider: ProviderName = None,
    model: ModelName = None,
    base_url: BaseUrl = None,
    max_tokens: MaxTokens = None,
    tool_choice: FirstToolChoice = None,
    max_turns: MaxTurns = None,
    max_tool_calls: MaxToolCalls = None,
    max_cost: MaxCost = None,
    max_wall: MaxWall = None,
    price_input: PriceInput = None,
    price_output: PriceOutput = None,
    yes: ApproveFlag = False,
    *,
    opts: SharedOptions,
) -> None:
    """Investigate QUESTION with tools on the hosts and print grounded findings.

    Exit codes: 0 answered; 1 error; 2 usage; 3 ended without a trustworthy answer (budget
    exhausted, refused, or no grounded finding).

    Example: sleuth ask "does /models/ckpt carry its MTP heads?" --host gpu1

    Example: sleuth ask "do all decode nodes run the same sglang?" --hosts decode
    """
    settings = opts.settings()
    export = opts.tracing()
    chosen = select_or_exit(settings, hosts, fleet, fleet_concurrency)
    _apply_budget_flags(settings, max_turns, max_tool_calls, max_cost, max_wall)
    interactive = sys.stdin.isatty() and not opts.as_json
    view = opts.view()
    pause = view.paused if isinstance(view, LiveView) else nullcontext
    try:
        brain = select_brain(
            settings,
            provider=provider,
            model=model,
            base_url=base_url,
            max_tokens=max_tokens,
            tool_choice=tool_choice,
        )
        if brain.model and (price_input is not None or price_output is not None):
            settings.prices[brain.model] = _flag_price(price_input, price_output)
        price = price_or_refuse(brain.model, settings)
        if isinstance(brain, OpenAIBrain):
            brain.probe()  # the first request: after every check that needs none
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    except BrainError as exc:
        fail(str(exc), EXIT_USAGE if exc.kind == "usage" else EXIT_ERROR)
    approve = approver(yes, interactive, pause)
    ctx = opts.open_chosen(chosen, approve)
    note = untracked_cost_note(brain.model, price)
    if not opts.as_json:
        say(describe_brain(brain))
        if note:
            say(f"note: {note}")
    mode = "--yes" if yes else "interactive" if interactive else "deny"
    seal = opts.seal(settings)  # says which key signs, or that none does
    result = _investigate(
        question, brain, ctx, settings, opts.transcripts, view, mode, seal, export
    )
    signing = signing_of(seal, settings)
    show(result, brain.name, opts.as_json, signing, cost_tracked=note is None)
    raise typer.Exit(EXIT_FOR_STATUS.get(result.status, EXIT_ERROR))


def _investigate(
    question: str,
    brain: Brain,
    ctx: ToolContext,
    settings: Settings,
    transcripts: Path,
    view: Quiet | LiveView,
    mode: str,
    seal: Seal,
    export: Tracing,
) -> RunResult:
    """Start the investigation and run it; however it ends, clean up and say what is left."""
    tool_data: dict[str, Any] = {}
    try:
        with export as ctx.tracing:
            inv = start_investigation(
                question,
                brain,
                ctx,
                settings,
                transcripts,
                observer=view,
                approval_mode=mode,
                seal=seal,
            )
            tool_data = inv.tool_data
            with view:
                return inv.run()
    finally:
        # Ended or interrupted: say which servers the run left running (issue 18.9).
        print_left_running(launched_by_run(ctx, tool_data))
        ctx.close()
        say_warnings(seal.warnings)


def _apply_budget_flags(
    settings: Settings,
    max_turns: int | None,
    max_tool_calls: int | None,
    max_cost: float | None,
    max_wall: float | None,
) -> None:
    # Assigned only when given: a field set here (or in sleuth.toml) counts as the user's own.
    b = settings.budget
    if max_turns is not None:
        b.max_turns = max_turns
    if max_tool_calls is not None:
        b.max_tool_calls = max_tool_calls
    if max_cost is not None:
        b.max_cost_usd = max_cost
    if max_wall is not None:
        b.max_wall_s = max_wall


def _flag_price(price_input: float | None, price_output: float | None) -> ModelPrice:
    if price_input is None or price_output is None:
        fail("--price-input and --price-output go together (USD per million tokens)", EXIT_USAGE)
    # Cached tokens are charged at the input price: an upper bound, never an undercount.
    return ModelPrice(
        input=price_input, output=price_output, cache_read=price_input, cache_write=price_input
    )


def show(
    result: RunResult, brain: str, as_json: bool, signing: Signing, cost_tracked: bool = True
) -> None:
    supported = result.status != "unsupported"
    if as_json:
        print_json(
            AskOutput(
                status=result.status,
                brain=brain,
                answer=result.answer,
                supported_by_evidence=supported,
                findings=result.findings,
                totals=result.totals,
                cost_tracked=cost_tracked,
                transcript=result.transcript,
                signing=signing,
            )
        )
        return
    if result.findings:
        console.print(findings_table(result.findings, piped=not console.is_terminal))
    if result.answer:
        if not supported:
            console.print(f"[bold yellow]The model's answer, {UNSUPPORTED_NOTE}:[/]")
        console.print(shown(result.answer), markup=False, highlight=False)
    t = result.totals
    cost = f"${t.cost_usd:.4f}" if cost_tracked else "cost not tracked"
    console.print(
        f"[bold]{result.status}[/] by {brain}: {plural(t.turns, 'turn')}, "
        f"{plural(t.tool_calls, 'tool call')}, "
        f"{t.input_tokens:,} in / {t.output_tokens:,} out tokens, {cost}, "
        f"{t.wall_s:.1f} s. Transcript: {escape(result.transcript)}",
        highlight=False,
        soft_wrap=True,
    )
