"""`sleuth bench`: the serving benchmark, run directly, with no model in the loop (one load,
a sweep, a trace replay, or a search for the highest rate that meets SLOs); `sleuth bench
compare A B`, the verdict on stored runs; `sleuth bench ab`, interleaved A/B repeats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from sleuth.cli import bench_args as opt
from sleuth.cli.bench_ab_cmd import AB_HELP, ab_cmd
from sleuth.cli.bench_args import audited, floats, headers
from sleuth.cli.bench_tables import compare_table, repeats_table, run_table, search_table
from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    HostName,
    Tracing,
    console,
    escape,
    fail,
    print_json,
)
from sleuth.cli.shared_options import EVERY_OPTION, SharedOptions, shared_options
from sleuth.config import LOCAL
from sleuth.outputs import BenchGoodputOutput, BenchOutput
from sleuth.tools.bench.bench_input import RunBenchmarkInput
from sleuth.tools.bench.compare import CompareError, compare, compare_repeats, is_stat
from sleuth.tools.bench.export import Format, export
from sleuth.tools.bench.goodput import GoodputSearch
from sleuth.tools.bench.models import BenchRun
from sleuth.tools.bench.plot import draw_run, draw_search, wants_plot
from sleuth.tools.bench.render import warnings
from sleuth.tools.bench.result_files import first_error, read_records, write_csv, write_html
from sleuth.tools.bench.run_benchmark import benchmark
from sleuth.tools.bench.slo_search import GoodputSearchInput, find_max_rate
from sleuth.tools.context import ToolContext
from sleuth.transcripts.seal import Seal

PlotOption = typer.Option(
    None, help="PNG of latency percentiles vs concurrency (default for a sweep: beside the JSONL)."
)
# The options only the run takes, beside the load's shared ones in bench_args.
MAX_CONCURRENCY = typer.Option(None, help="Open loop: cap on in-flight.")
BURSTINESS = typer.Option(
    1.0, help="Open loop: gamma shape of arrivals, as vllm bench serve (1 = Poisson)."
)
RAMP_UP = typer.Option(
    None, help="Open loop: FROM,TO req/s, the rate moving linearly over the run."
)
RANGE_RATIO = typer.Option(0.0, help="random: lengths uniform in len*(1±ratio).")
PREFIX_GROUPS = typer.Option(4, help="prefix: how many shared prefixes.")
TURNS = typer.Option(3, help="multiturn: turns per conversation.")
TEMPERATURE = typer.Option(0.0, help="Sampling temperature.")
IGNORE_EOS = typer.Option(
    True, help="Generate exactly --output-len tokens (--no-ignore-eos to let them stop)."
)
PERCENTILES = typer.Option("50,90,99", help="Percentiles to report, e.g. 50,90,99,99.9.")
LABEL = typer.Option(
    None, help="A name for this run (kept in its records), e.g. spec-on; see compare --factor."
)
SLO_TARGET = typer.Option(
    0.9, help="With --find-max-rate: the share of requests that must meet --slo."
)
FIND_MAX_RATE = typer.Option(
    None,
    help="LOW,HIGH req/s: search for the highest rate where --slo-target of requests meet "
    "--slo (bisection; each probe is one open-loop run of -n requests or --duration s).",
)
SEARCH_STEPS = typer.Option(6, help="With --find-max-rate: at most this many runs.")
SEARCH_BUDGET = typer.Option(
    600.0, help="With --find-max-rate: no run starts that would pass this many seconds."
)
EXPORT = typer.Option(
    None,
    "--export",
    help="FORMAT FILE: also write the results as aiperf's profile_export_aiperf.json or "
    "inference-perf's summary_lifecycle_metrics.json (FORMAT aiperf or inference-perf).",
)
RUN_HELP = """Benchmark an OpenAI-compatible streaming server and print its latency and throughput.

Give one of -c (closed loop) and -r (open loop), or --trace FILE to replay a trace at
its own times (--speed 2x, --max-requests, --max-duration). --slo reports the share of
requests meeting every limit and the goodput; with --find-max-rate LOW,HIGH it finds
the highest rate at which --slo-target of them still do. Typing the command is the
approval, so no prompt is shown. A remote host must still permit it: `allow =
["run_benchmark"]` under its \\[hosts.NAME] table in sleuth.toml. Results are printed
and saved as JSONL, CSV, HTML and PNG under --out-dir.

Example: sleuth bench http://127.0.0.1:30000 -m qwen -c 1,8,32 -n 128

Example: sleuth bench http://127.0.0.1:8000 -m m --trace mooncake.jsonl --speed 2x

Example: sleuth bench http://127.0.0.1:8000 -m m --slo ttft=500ms,tpot=50ms
--find-max-rate 1,64 --duration 60
"""
SUBCOMMANDS = ("run", "compare", "ab")


class _BenchGroup(TyperGroup):
    """`sleuth bench ENDPOINT ...` runs a benchmark; `compare` and `ab` are subcommands. Any
    other first word belongs to the run, so the run needs no subcommand name."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or args[0] not in SUBCOMMANDS:
            args = ["run", *args]
        result: list[str] = super().parse_args(ctx, args)
        return result


bench_app = typer.Typer(
    cls=_BenchGroup,
    add_completion=False,
    no_args_is_help=False,
    help="Benchmark a serving endpoint (sleuth bench ENDPOINT -m MODEL -c 1,8), compare "
    "runs (sleuth bench compare A B), or A/B two configurations in turns (sleuth bench ab "
    "URL_A URL_B -m MODEL -c 8). See sleuth bench --help.",
)
bench_app.command("ab", help=AB_HELP)(ab_cmd)


@bench_app.command("run", help=RUN_HELP)
@shared_options(*EVERY_OPTION)
def bench(
    cli: typer.Context,
    endpoint: str = typer.Argument(..., help="Server as the host sees it: http://127.0.0.1:PORT"),
    model: str = opt.MODEL,
    host: HostName = LOCAL,
    concurrency: str | None = opt.CONCURRENCY,
    request_rate: float | None = opt.RATE,
    max_concurrency: int | None = MAX_CONCURRENCY,
    burstiness: float = BURSTINESS,
    ramp_up: str | None = RAMP_UP,
    duration: float | None = opt.DURATION,
    num_prompts: int | None = opt.NUM_PROMPTS,
    input_len: int = opt.INPUT_LEN,
    output_len: int = opt.OUTPUT_LEN,
    dataset: str = opt.DATASET,
    dataset_path: str | None = opt.DATASET_PATH,
    trace: str | None = opt.TRACE,
    speed: str = opt.SPEED,
    max_requests: int | None = opt.MAX_REQUESTS,
    block_size: int = opt.BLOCK_SIZE,
    shared_prefix: str | None = opt.SHARED_PREFIX,
    range_ratio: float = RANGE_RATIO,
    prefix_len: int = opt.PREFIX_LEN,
    prefix_groups: int = PREFIX_GROUPS,
    turns: int = TURNS,
    tokenizer: str | None = opt.TOKENIZER,
    api_key: str | None = opt.API_KEY,
    header: list[str] = opt.HEADER,
    extra_body: str | None = opt.EXTRA_BODY,
    temperature: float = TEMPERATURE,
    ignore_eos: bool = IGNORE_EOS,
    percentiles: str = PERCENTILES,
    label: str | None = LABEL,
    seed: int = opt.SEED,
    warmup: int = opt.WARMUP,
    api: str = opt.API,
    where: str = opt.WHERE,
    python: str | None = opt.PYTHON,
    slo: str | None = opt.SLO,
    slo_target: float = SLO_TARGET,
    find_max_rate: str | None = FIND_MAX_RATE,
    search_steps: int = SEARCH_STEPS,
    search_budget: float = SEARCH_BUDGET,
    export_as: tuple[str, Path] | None = EXPORT,
    out_dir: Path = opt.OUT_DIR,
    plot: Path | None = PlotOption,
    *,
    opts: SharedOptions,
) -> None:
    # The load's options reach run_benchmark's input by name, from cli.params (load_input).
    settings = opts.settings()
    if find_max_rate and (concurrency or request_rate is not None):
        fail("--find-max-rate sets the rates itself: leave out -c and -r", EXIT_USAGE)
    fmt = _export_format(export_as)
    tracing = opts.tracing()
    want_plot = plot is not None or bool(concurrency and "," in concurrency) or find_max_rate
    plt = opt.plot_module(required=plot is not None) if want_plot else None
    # Each probe of --find-max-rate sets its own rate; this one only picks the open loop.
    args = opt.load_input(cli.params, request_rate=1.0 if find_max_rate else request_rate)
    ctx = opts.open_hosts(settings, [host])
    ctx.results_dir = out_dir
    sent = headers(header, api_key)
    seal = opts.seal(settings)  # says which key signs, or that none does
    if find_max_rate:
        search = _search_input(args, find_max_rate, slo_target, search_steps, search_budget)
        _search(ctx, search, sent, opts.transcripts, seal, plt, opts.as_json, tracing)
        return
    run, transcript = _run(ctx, args, sent, opts.transcripts, seal, tracing)
    _show(run, transcript, plot, plt, fmt, opts.as_json)


def _search_input(
    load: RunBenchmarkInput, rates: str, target: float, steps: int, budget: float
) -> GoodputSearchInput:
    """--find-max-rate's search: `load` at each probe's rate, between the LOW,HIGH given."""
    bounds = floats(rates, "--find-max-rate", 2)
    return GoodputSearchInput(
        host=load.host,
        load=load.model_dump(exclude={"host", "request_rate", "concurrency"}),
        slo=load.slo(),
        target=target,
        rate_low=bounds[0],
        rate_high=bounds[1],
        max_steps=steps,
        time_budget_s=budget,
    )


def _export_format(given: tuple[str, Path] | None) -> tuple[Format, Path] | None:
    if given is None:
        return None
    name, path = given
    if name not in ("aiperf", "inference-perf"):
        fail(f"--export {name!r}: give aiperf or inference-perf, then the file", EXIT_USAGE)
    return ("aiperf" if name == "aiperf" else "inference-perf"), path


def _run(
    ctx: ToolContext,
    args: RunBenchmarkInput,
    sent: dict[str, str],
    transcripts: Path,
    seal: Seal,
    tracing: Tracing,
) -> tuple[BenchRun, Path]:
    """Run the benchmark, audited like a model's call (the headers are not inputs)."""
    phases = [f"c={c}" for c in args.concurrency or []] or [
        "the trace's own times" if args.replay else f"{args.request_rate} req/s"
    ]
    status = f"benchmarking {args.endpoint} on {args.host}: {', '.join(phases)}"
    result, transcript = audited(
        ctx,
        "run_benchmark",
        args,
        status,
        transcripts,
        lambda run_ctx: benchmark(run_ctx, args, sent),
        seal,
        tracing,
    )
    return BenchRun.model_validate(result.data), transcript


def _search(
    ctx: ToolContext,
    args: GoodputSearchInput,
    sent: dict[str, str],
    transcripts: Path,
    seal: Seal,
    plt: Any,
    as_json: bool,
    tracing: Tracing,
) -> None:
    status = f"searching {args.rate_low:g}..{args.rate_high:g} req/s for the SLO's top rate"
    result, transcript = audited(
        ctx,
        "goodput_search",
        args,
        status,
        transcripts,
        lambda run_ctx: find_max_rate(run_ctx, args, sent),
        seal,
        tracing,
    )
    found = GoodputSearch.model_validate(result.data)
    png = None
    if plt is not None and found.probes:
        png = draw_search(found, plt, Path(found.probes[0].jsonl).with_suffix(".search.png"))
    if as_json:
        out = BenchGoodputOutput(**found.model_dump(), transcript=str(transcript))
        out.plot = str(png) if png else None
        print_json(out)
        return
    console.print(search_table(found))
    console.print(escape(result.output.splitlines()[0]))
    console.print(f"stopped: {escape(found.stopped)}")
    console.print(f"transcript: {escape(str(transcript))}")
    if png:
        console.print(f"plot: {escape(str(png))}")


def _show(
    run: BenchRun,
    transcript: Path,
    plot: Path | None,
    plt: Any,
    fmt: tuple[Format, Path] | None,
    as_json: bool,
) -> None:
    """Print the run and write its CSV, HTML, exports and plots; fail when nothing succeeded."""
    records = read_records(run)
    table_csv = write_csv(run)
    page = write_html(run, records)
    exported = export(run, records, fmt[0], fmt[1].resolve()) if fmt else []
    out = BenchOutput(
        **run.model_dump(),
        transcript=str(transcript),
        csv=str(table_csv),
        html=str(page),
        exported=[str(p) for p in exported],
    )
    if not as_json:
        console.print(run_table(run))
        for line in warnings(run.report):
            console.print(f"[yellow]{escape(line)}[/]")
        for name, path in [("records", run.jsonl), ("table", table_csv), ("report", page)]:
            console.print(f"{name}: {escape(str(path))}")
        for path in exported:
            console.print(f"exported: {escape(str(path))}")
        console.print(f"transcript: {escape(str(transcript))}")
    # After the results are out, so a failed plot loses nothing.
    pngs = draw_run(run, records, plt, plot) if plt is not None and wants_plot(run, plot) else []
    if as_json:
        out.plot = str(pngs[0]) if pngs else None
        out.plots = [str(p) for p in pngs]
        print_json(out)
    for png in [] if as_json else pngs:
        console.print(f"plot: {escape(str(png))}")
    if not any(p.completed for p in run.report.phases):
        fail(f"no request succeeded: {first_error(records)}", EXIT_ERROR)


@bench_app.command("compare")
@shared_options("as_json")
def compare_cmd(
    a: Path = typer.Argument(
        ..., help="The baseline: a run's JSONL, or a folder of runs (e.g. an ab run's A/)."
    ),
    b: Path = typer.Argument(..., help="The runs to judge against it, the same way."),
    factor: list[str] = typer.Option(
        [],
        "--factor",
        help="A setting expected to differ (e.g. model, label, url); others that differ warn.",
    ),
    stat: str = typer.Option("p50,p90", help="Statistics per metric: p50, p90, p99, mean."),
    resamples: int = typer.Option(1000, min=100, max=100_000, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Seeds the bootstrap, so a verdict can be reproduced."),
    level: float = typer.Option(0.95, help="Several runs a side: the confidence level."),
    *,
    opts: SharedOptions,
) -> None:
    """Is B different from A? One run a side: B's change per metric with a 95% bootstrap
    interval over the requests. Several runs a side (folders): the runs are paired in the
    order they ran and judged like `sleuth bench ab` (a paired t-interval over the pairs).

    Either way it says whether the runs took turns: runs that did not are confounded with
    the machine's drift between them. One run a side: a change is called significant only
    when its interval excludes zero and it is at least 3%.

    Example: sleuth bench compare bench-results/no-spec.jsonl bench-results/spec.jsonl

    Example: sleuth bench compare bench-results/ab-20260101-120000/A bench-results/ab-.../B
    """
    names = [s.strip() for s in stat.split(",") if s.strip()]
    stats = [s for s in names if is_stat(s)]
    if not stats or len(stats) != len(names):
        fail(f"--stat {stat!r}: choose from p50, p90, p99, mean (comma-separated)", EXIT_USAGE)
    runs_a, runs_b = _runs(a), _runs(b)
    try:
        if len(runs_a) == 1 and len(runs_b) == 1:
            report = compare(
                runs_a[0], runs_b[0], seed=seed, resamples=resamples, stats=stats, factor=factor
            )
        else:
            report = compare_repeats(runs_a, runs_b, level=level)
    except CompareError as exc:
        fail(str(exc), EXIT_USAGE)
    if opts.as_json:
        print_json(report)
        return
    console.print(repeats_table(report) if report.repeats else compare_table(report))
    for line in report.warnings:
        console.print(f"[yellow]warning: {escape(line)}[/]")
    console.print(escape(report.summary))


def _runs(given: Path) -> list[Path]:
    """A run's JSONL, or every JSONL in a folder, oldest name first."""
    if given.is_dir():
        found = sorted(given.glob("*.jsonl"))
        if not found:
            fail(f"{given} holds no .jsonl runs", EXIT_USAGE)
        return found
    return [given]
