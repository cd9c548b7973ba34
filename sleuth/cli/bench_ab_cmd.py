"""`sleuth bench ab`: two configurations benchmarked in turns (ABBA) over repeats, with a
verdict per metric: B faster, slower, or not detectably different at the stated level."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer

from sleuth.cli import bench_args as opt
from sleuth.cli.bench_args import audited, headers
from sleuth.cli.bench_tables import ab_table
from sleuth.cli.common import EXIT_USAGE, HostName, approver, console, escape, fail, print_json
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import LOCAL
from sleuth.outputs import BenchABOutput
from sleuth.tools.bench.ab_run import ABBenchmarkInput, ABResult, ABSide, run_ab
from sleuth.tools.bench.metrics import parse_lines
from sleuth.tools.bench.models import RequestRecord
from sleuth.tools.bench.plot import draw_cdfs, draw_intervals

# The options only `bench ab` takes, beside the load's shared ones in bench_args.
MIN_EFFECT = typer.Option(
    0.0, help="Smallest relative change called a difference, e.g. 0.02 for 2%."
)
ENGINE = typer.Option(
    None, help="Relaunch mode: sglang or vllm, started once per side with its flags."
)
LAUNCH_ENV = typer.Option([], help="Relaunch mode: NAME=VALUE for both servers (repeatable).")
YES = typer.Option(
    False, "--yes", help="Approve the launches and stops (relaunch mode) without asking."
)
AB_HELP = """A/B two configurations: the same load against A and B in turns (ABBA), --repeats runs
each, each with its warm-up; per metric, B's change with a paired t-interval over the
repeats and a verdict: faster, slower, or no detectable difference at --level
(Holm-corrected over the metrics).

Give two running servers, or --engine and --model-path to launch one server per side
with --a-args and --b-args (each launch is approved like any launch_server call: --yes,
a rule in sleuth.toml, or a prompt).

Example: sleuth bench ab http://127.0.0.1:8000 http://127.0.0.1:8001 -m qwen -c 8 -n 64

Example: sleuth bench ab --engine vllm --model-path /models/qwen -m /models/qwen -c 8
--a-args '--max-num-seqs 64' --b-args '--max-num-seqs 128' --yes
"""


@shared_options("accept_new_host_key", "transcripts", "no_sign", "as_json", "config")
def ab_cmd(
    cli: typer.Context,
    a: str | None = typer.Argument(None, help="Server A as the host sees it (or use --engine)."),
    b: str | None = typer.Argument(None, help="Server B, judged against A."),
    model: str = opt.MODEL,
    host: HostName = LOCAL,
    concurrency: str | None = opt.CONCURRENCY,
    request_rate: float | None = opt.RATE,
    duration: float | None = opt.DURATION,
    num_prompts: int | None = opt.NUM_PROMPTS,
    input_len: int = opt.INPUT_LEN,
    output_len: int = opt.OUTPUT_LEN,
    dataset: str = opt.DATASET,
    dataset_path: str | None = opt.DATASET_PATH,
    trace: str | None = opt.TRACE,
    speed: str = opt.SPEED,
    max_requests: int | None = opt.MAX_REQUESTS,
    shared_prefix: str | None = opt.SHARED_PREFIX,
    prefix_len: int = opt.PREFIX_LEN,
    tokenizer: str | None = opt.TOKENIZER,
    api_key: str | None = opt.API_KEY,
    header: list[str] = opt.HEADER,
    extra_body: str | None = opt.EXTRA_BODY,
    seed: int = opt.SEED,
    warmup: int = opt.WARMUP,
    api: str = opt.API,
    where: str = opt.WHERE,
    python: str | None = opt.PYTHON,
    slo: str | None = opt.SLO,
    repeats: int = typer.Option(5, help="Runs of each side, in ABBA order."),
    level: float = typer.Option(0.95, help="Confidence level of the verdicts."),
    min_effect: float = MIN_EFFECT,
    label_a: str | None = typer.Option(None, help="A name for A, e.g. spec-off."),
    label_b: str | None = typer.Option(None, help="A name for B, e.g. spec-on."),
    engine: str | None = ENGINE,
    model_path: str | None = typer.Option(None, help="Relaunch mode: the model folder."),
    port: int = typer.Option(30000, help="Relaunch mode: the port both sides listen on."),
    launch_python: str | None = typer.Option(None, help="Relaunch mode: the engine's python."),
    a_args: str = typer.Option("", help="Relaunch mode: A's engine flags, e.g. '--tp 1'."),
    b_args: str = typer.Option("", help="Relaunch mode: B's engine flags."),
    launch_env: list[str] = LAUNCH_ENV,
    launch_timeout: float = typer.Option(1800.0, help="Relaunch mode: seconds to be ready."),
    yes: bool = YES,
    out_dir: Path = opt.OUT_DIR,
    *,
    opts: SharedOptions,
) -> None:
    # The load's options reach run_benchmark's input by name, from cli.params (load_input).
    settings = opts.settings()
    if (a is None or b is None) == (engine is None):
        fail("give two server URLs, or --engine and --model-path to launch each side", EXIT_USAGE)
    load = opt.load_input(cli.params, endpoint=a or f"http://127.0.0.1:{port}")
    if engine is not None:
        base = _launch(engine, model_path, port, launch_python, launch_env, launch_timeout)
        side_a = ABSide(launch={**base, "extra_args": shlex.split(a_args)}, label=label_a)
        side_b = ABSide(launch={**base, "extra_args": shlex.split(b_args)}, label=label_b)
    else:
        side_a, side_b = ABSide(endpoint=a, label=label_a), ABSide(endpoint=b, label=label_b)
    args = _ab_input(host, side_a, side_b, load.model_dump(exclude={"host", "endpoint"}), repeats)
    args = args.model_copy(update={"level": level, "min_effect": min_effect})
    approve = approver(yes, sys.stdin.isatty())
    ctx = opts.open_hosts(settings, [host], approve)
    ctx.results_dir = out_dir
    sent = headers(header, api_key)
    seal = opts.seal(settings)  # says which key signs, or that none does
    status = f"A/B on {host}: {repeats} runs of each side in ABBA order"
    result, transcript = audited(
        ctx,
        "ab_benchmark",
        args,
        status,
        opts.transcripts,
        lambda run_ctx: run_ab(run_ctx, args, sent),  # its relaunches: calls of their own
        seal,
    )
    _show(ABResult.model_validate(result.data), transcript, opts.as_json)


def _launch(
    engine: str,
    model_path: str | None,
    port: int,
    python: str | None,
    env: list[str],
    timeout: float,
) -> dict[str, Any]:
    if not model_path:
        fail("--engine needs --model-path, the model folder on the host", EXIT_USAGE)
    pairs = [item.partition("=") for item in env]
    if any(not sep or not name for name, sep, _ in pairs):
        fail("--launch-env takes NAME=VALUE", EXIT_USAGE)
    launch: dict[str, Any] = {
        "engine": engine,
        "model_path": model_path,
        "port": port,
        "env": {name: value for name, _, value in pairs},
        "timeout_s": timeout,
    }
    if python:
        launch["python"] = python
    return launch


def _ab_input(
    host: str, side_a: ABSide, side_b: ABSide, load: dict[str, Any], repeats: int
) -> ABBenchmarkInput:
    try:
        return ABBenchmarkInput(host=host, a=side_a, b=side_b, load=load, repeats=repeats)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)


def _show(outcome: ABResult, transcript: Path, as_json: bool) -> None:
    """Print the verdicts and draw the intervals and the CDFs of both sides."""
    plt = opt.plot_module(required=False, what="the A/B plots")
    plots: list[Path] = []
    if plt is not None:
        folder = Path(outcome.folder)
        plots.append(draw_intervals(outcome.analysis, plt, folder / "ab-intervals.png"))
        groups = {s: _records([r.jsonl for r in outcome.runs if r.side == s]) for s in "AB"}
        plots.append(draw_cdfs(groups, plt, folder / "ab-cdf.png"))
    if as_json:
        out = BenchABOutput(**outcome.model_dump(), transcript=str(transcript))
        out.plots = [str(p) for p in plots]
        print_json(out)
        return
    title = f"B ({outcome.b.label or 'B'}) against A ({outcome.a.label or 'A'}) on {outcome.host}"
    console.print(ab_table(outcome.analysis, title))
    for line in outcome.analysis.warnings:
        console.print(f"[yellow]warning: {escape(line)}[/]")
    console.print(escape(outcome.analysis.summary))
    console.print(f"records: {escape(outcome.folder)}")
    console.print(f"transcript: {escape(str(transcript))}")
    for png in plots:
        console.print(f"plot: {escape(str(png))}")


def _records(paths: list[str]) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            out += [r for r in parse_lines(fh)[2] if not r.warmup and r.ok]
    return out
