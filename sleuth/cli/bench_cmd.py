"""`sleuth bench`: the serving benchmark, run directly, with no model in the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    ConfigOption,
    JsonOption,
    console,
    err_console,
    fail,
    print_json,
    settings_or_exit,
)
from sleuth.config import LOCAL, ConfigError
from sleuth.tools.bench import BenchRun, RunBenchmarkInput, run_benchmark, warnings
from sleuth.tools.benchmetrics import Dist
from sleuth.tools.connect import build_context
from sleuth.tools.hosts import HostError
from sleuth.tools.results import ToolError

OutDirOption = typer.Option(Path("bench-results"), help="Where the JSONL (and plot) go.")
PlotOption = typer.Option(
    None, help="PNG of latency percentiles vs concurrency (default for a sweep: beside the JSONL)."
)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def bench(
    endpoint: str = typer.Argument(..., help="Server as the host sees it: http://127.0.0.1:PORT"),
    model: str = typer.Option(..., "--model", "-m", help="Model name for the requests."),
    host: str = typer.Option("local", "--host", "-H", help="Host serving it (from sleuth.toml)."),
    concurrency: str | None = typer.Option(
        None, "--concurrency", "-c", help="Closed loop: e.g. 1,4,16 (a sweep)."
    ),
    request_rate: float | None = typer.Option(
        None, "--request-rate", "-r", help="Open loop: Poisson requests/s."
    ),
    max_concurrency: int | None = typer.Option(None, help="Open loop: cap on in-flight."),
    num_prompts: int = typer.Option(64, "--num-prompts", "-n", help="Requests per phase."),
    input_len: int = typer.Option(256, help="Prompt length in words (≈ tokens)."),
    output_len: int = typer.Option(256, help="max_tokens, with ignore_eos."),
    seed: int = typer.Option(0),
    warmup: int = typer.Option(2, help="Requests sent first and left out."),
    api: str = typer.Option("chat", help="chat or completions."),
    where: str = typer.Option("remote", help="remote: on the host; local: here, forwarded."),
    python: str | None = typer.Option(None, help="Python on the host with aiohttp."),
    slo_ttft_ms: float | None = typer.Option(None, help="Goodput SLO: TTFT (ms)."),
    slo_tpot_ms: float | None = typer.Option(None, help="Goodput SLO: TPOT (ms)."),
    slo_e2e_ms: float | None = typer.Option(None, help="Goodput SLO: E2E latency (ms)."),
    out_dir: Path = OutDirOption,
    plot: Path | None = PlotOption,
    accept_new_host_key: bool = typer.Option(False, "--accept-new-host-key"),
    as_json: bool = JsonOption,
    config: Path | None = ConfigOption,
) -> None:
    """Benchmark an OpenAI-compatible streaming server and print its latency and throughput.

    Typing the command is the approval, so no prompt is shown. A remote host must still
    permit it: `allow = ["run_benchmark"]` under its [hosts.NAME] in sleuth.toml.

    Example: sleuth bench http://127.0.0.1:30000 -m qwen -c 1,8,32 -n 128
    """
    settings = settings_or_exit(config)
    try:
        args = RunBenchmarkInput(
            host=host,
            endpoint=endpoint,
            model=model,
            api=api,
            concurrency=_ints(concurrency),
            request_rate=request_rate,
            max_concurrency=max_concurrency,
            num_prompts=num_prompts,
            input_len=input_len,
            output_len=output_len,
            seed=seed,
            warmup=warmup,
            where=where,
            python=python,
            slo_ttft_ms=slo_ttft_ms,
            slo_tpot_ms=slo_tpot_ms,
            slo_e2e_ms=slo_e2e_ms,
        )
    except ValidationError as exc:
        fail(
            "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
            ),
            EXIT_USAGE,
        )
    try:
        ctx = build_context(settings, [host], accept_new_host_key=accept_new_host_key)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    ctx.results_dir = out_dir
    phases = [f"c={c}" for c in args.concurrency or []] or [f"{args.request_rate} req/s"]
    try:
        if host != LOCAL:
            ctx.host(host).check_allowed("run_benchmark")
        with err_console.status(
            f"benchmarking {endpoint} on {host}: {len(phases)} phase(s) of "
            f"{args.num_prompts} requests ({', '.join(phases)})",
            spinner="dots",
        ):
            result = run_benchmark(ctx, args)
    except (ToolError, HostError) as exc:
        fail(str(exc), EXIT_ERROR)
    finally:
        ctx.close()
    run = BenchRun.model_validate(result.data)
    png = _maybe_plot(run, plot)
    if as_json:
        data = run.model_dump(mode="json")
        data["plot"] = str(png) if png else None
        print_json(data)
        return
    console.print(_table(run))
    for line in warnings(run.report):
        console.print(f"[yellow]{escape(line)}[/]")
    console.print(f"records: {escape(run.jsonl)}")
    if png:
        console.print(f"plot: {escape(str(png))}")


def _ints(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--concurrency {text!r}: give integers separated by commas, e.g. 1,4,16", EXIT_USAGE)


def _cell(d: Dist, field: str = "p50") -> str:
    value = getattr(d, field)
    return "-" if value is None else f"{value:.1f}"


def _table(run: BenchRun) -> Table:
    table = Table(title=f"benchmark on {run.host} (load generator: {run.where})")
    for name in (
        "load",
        "ok/n",
        "TTFT p50/p99",
        "TTFT sched p99",
        "TPOT p50/p99",
        "ITL p50",
        "E2E p50/p99",
        "req/s",
        "out tok/s",
        "conc",
        "goodput",
    ):
        table.add_column(name, justify="right")
    for p in run.report.phases:
        load = f"c={p.concurrency_target}" if p.mode == "closed" else f"r={p.request_rate:g}"
        good = "-" if p.goodput is None else f"{p.goodput:.2f}"
        table.add_row(
            load,
            f"{p.completed}/{p.requests}",
            f"{_cell(p.ttft)}/{_cell(p.ttft, 'p99')}",
            _cell(p.ttft_from_sched, "p99"),
            f"{_cell(p.tpot)}/{_cell(p.tpot, 'p99')}",
            _cell(p.itl_chunk),
            f"{_cell(p.e2e)}/{_cell(p.e2e, 'p99')}",
            f"{p.request_throughput:.2f}",
            f"{p.output_throughput:.1f}",
            f"{p.concurrency:.2f}",
            good,
        )
    return table


def _maybe_plot(run: BenchRun, plot: Path | None) -> Path | None:
    closed = [p for p in run.report.phases if p.mode == "closed"]
    if len(closed) < 2 and plot is None:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("drawing the plot needs matplotlib: pip install 'sleuth[plot]'", EXIT_ERROR)
    target = plot or Path(run.jsonl).with_suffix(".png")
    xs = [p.concurrency_target for p in closed]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    metrics: list[tuple[str, str]] = [("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")]
    for ax, (key, title) in zip(axes, metrics, strict=True):
        for field in ("p50", "p90", "p99"):
            ys: list[Any] = [getattr(getattr(p, key), field) for p in closed]
            ax.plot(xs, ys, marker="o", label=field)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"{run.host}: latency percentiles vs concurrency")
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
