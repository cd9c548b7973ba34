"""`sleuth bench`: the serving benchmark, run directly, with no model in the loop; and
`sleuth bench compare A.jsonl B.jsonl`, the A/B verdict on two runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from typer.core import TyperGroup

from sleuth.agent.session import CLI_CALL_ID, new_session_id, record_cli_call
from sleuth.cli.bench_tables import compare_table, run_table
from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    ConfigOption,
    JsonOption,
    OtelContent,
    OtlpEndpoint,
    console,
    err_console,
    fail,
    print_json,
    settings_or_exit,
    telemetry,
)
from sleuth.config import LOCAL, ConfigError
from sleuth.hosts.host import HostError
from sleuth.outputs import BenchOutput
from sleuth.tools.bench.compare import CompareError, compare, is_stat
from sleuth.tools.bench.models import BenchRun
from sleuth.tools.bench.plot import draw, pyplot, wants_plot
from sleuth.tools.bench.render import warnings
from sleuth.tools.bench.result_files import first_error, read_records, write_csv, write_html
from sleuth.tools.bench.run_benchmark import RunBenchmarkInput, benchmark
from sleuth.tools.context import ToolContext, build_context
from sleuth.tools.results import ToolError
from sleuth.transcripts.redact import register_secret
from sleuth.transcripts.store import TranscriptError

OutDirOption = typer.Option(
    Path("bench-results"), help="Where the JSONL, the CSV (and the plot) go."
)
PlotOption = typer.Option(
    None, help="PNG of latency percentiles vs concurrency (default for a sweep: beside the JSONL)."
)


class _BenchGroup(TyperGroup):
    """`sleuth bench ENDPOINT ...` runs a benchmark; `sleuth bench compare A B` compares two.
    Any first word but `compare` belongs to the run, so the run needs no subcommand name."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or args[0] not in ("run", "compare"):
            args = ["run", *args]
        result: list[str] = super().parse_args(ctx, args)
        return result


bench_app = typer.Typer(cls=_BenchGroup, add_completion=False, no_args_is_help=False)


def register(app: typer.Typer) -> None:
    app.add_typer(
        bench_app,
        name="bench",
        help="Benchmark a serving endpoint (sleuth bench ENDPOINT -m MODEL -c 1,8), or compare "
        "two runs (sleuth bench compare A.jsonl B.jsonl). See sleuth bench --help.",
    )


@bench_app.command("run")
def bench(
    endpoint: str = typer.Argument(..., help="Server as the host sees it: http://127.0.0.1:PORT"),
    model: str = typer.Option(..., "--model", "-m", help="Model name for the requests."),
    host: str = typer.Option("local", "--host", "-H", help="Host serving it (from sleuth.toml)."),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        "-c",
        help="Closed loop: e.g. 1,4,16 (a sweep). Give this or --request-rate.",
    ),
    request_rate: float | None = typer.Option(
        None,
        "--request-rate",
        "-r",
        help="Open loop: requests/s (0 = all at once). Give this or --concurrency.",
    ),
    max_concurrency: int | None = typer.Option(None, help="Open loop: cap on in-flight."),
    burstiness: float = typer.Option(
        1.0, help="Open loop: gamma shape of arrivals, as vllm bench serve (1 = Poisson)."
    ),
    ramp_up: str | None = typer.Option(
        None, help="Open loop: FROM,TO req/s, the rate moving linearly over the run."
    ),
    duration: float | None = typer.Option(
        None, help="Seconds per phase; then -n is only a cap (default 10000)."
    ),
    num_prompts: int | None = typer.Option(
        None, "--num-prompts", "-n", help="Requests per phase [default: 64]."
    ),
    input_len: int = typer.Option(
        256, help="Prompt length: tokens with --tokenizer, else words (about one token each)."
    ),
    output_len: int = typer.Option(256, help="max_tokens per request."),
    dataset: str = typer.Option(
        "random", help="random, sharegpt, jsonl (with --dataset-path), prefix or multiturn."
    ),
    dataset_path: str | None = typer.Option(
        None, help='sharegpt JSON or JSONL ({"prompt": ..., "output_len": N}) on the host.'
    ),
    range_ratio: float = typer.Option(0.0, help="random: lengths uniform in len*(1±ratio)."),
    prefix_len: int = typer.Option(256, help="prefix: length of each shared prefix."),
    prefix_groups: int = typer.Option(4, help="prefix: how many shared prefixes."),
    turns: int = typer.Option(3, help="multiturn: turns per conversation."),
    tokenizer: str | None = typer.Option(
        None,
        help="Folder with tokenizer.json on the host, for exact token lengths; 'auto' takes "
        "the served model's folder when it is inside the host's roots.",
    ),
    api_key: str | None = typer.Option(
        None,
        help="Sent as 'Authorization: Bearer KEY' [default: $OPENAI_API_KEY]; travels on "
        "stdin, never on a command line.",
        show_default=False,
    ),
    header: list[str] = typer.Option(
        [], "--header", help="Extra request header K:V (repeatable); values stay off argv."
    ),
    extra_body: str | None = typer.Option(
        None, help="JSON object merged into every request, e.g. '{\"top_k\": 1}'."
    ),
    temperature: float = typer.Option(0.0, help="Sampling temperature."),
    ignore_eos: bool = typer.Option(
        True, help="Generate exactly --output-len tokens (--no-ignore-eos to let them stop)."
    ),
    percentiles: str = typer.Option("50,90,99", help="Percentiles to report, e.g. 50,90,99,99.9."),
    label: str | None = typer.Option(
        None, help="A name for this run (kept in its records), e.g. spec-on; see compare --factor."
    ),
    seed: int = typer.Option(0, help="Seeds prompts, lengths and arrival times."),
    warmup: int = typer.Option(2, help="Requests sent first and left out."),
    api: str = typer.Option("chat", help="chat or completions."),
    where: str = typer.Option("remote", help="remote: on the host; local: here, forwarded."),
    python: str | None = typer.Option(None, help="Python on the host with aiohttp."),
    slo_ttft_ms: float | None = typer.Option(None, help="Goodput SLO: TTFT (ms)."),
    slo_tpot_ms: float | None = typer.Option(None, help="Goodput SLO: TPOT (ms)."),
    slo_e2e_ms: float | None = typer.Option(None, help="Goodput SLO: E2E latency (ms)."),
    out_dir: Path = OutDirOption,
    plot: Path | None = PlotOption,
    accept_new_host_key: bool = typer.Option(
        False, "--accept-new-host-key", help="Store an unknown host key (like accept-new)."
    ),
    transcripts: Path = typer.Option(
        Path("transcripts"), "--transcripts", help="Folder the run's transcript is written to."
    ),
    otlp_endpoint: OtlpEndpoint = None,
    otel_content: OtelContent = False,
    as_json: bool = JsonOption,
    config: Path | None = ConfigOption,
) -> None:
    """Benchmark an OpenAI-compatible streaming server and print its latency and throughput.

    Give one of -c (closed loop) and -r (open loop). Typing the command is the approval,
    so no prompt is shown. A remote host must still permit it: `allow = ["run_benchmark"]`
    under its \\[hosts.NAME] table in sleuth.toml. Results are printed and saved as JSONL
    and CSV under --out-dir. To compare two runs: sleuth bench compare A.jsonl B.jsonl.

    Example: sleuth bench http://127.0.0.1:30000 -m qwen -c 1,8,32 -n 128

    Example: sleuth bench http://127.0.0.1:8000 -m m -r 4 --burstiness 0.5 --duration 60
    """
    settings = settings_or_exit(config)
    export = telemetry(otlp_endpoint, otel_content)
    if plot is not None or (concurrency and "," in concurrency):
        _plot_module(required=plot is not None)
    headers = _headers(header, api_key)
    args = _run_input(
        host=host,
        endpoint=endpoint,
        model=model,
        api=api,
        concurrency=_ints(concurrency),
        request_rate=request_rate,
        max_concurrency=max_concurrency,
        num_prompts=num_prompts or (10_000 if duration else 64),
        duration_s=duration,
        burstiness=burstiness,
        ramp_up=_floats(ramp_up, "--ramp-up", 2),
        input_len=input_len,
        output_len=output_len,
        dataset=dataset,
        dataset_path=dataset_path,
        range_ratio=range_ratio,
        prefix_len=prefix_len,
        prefix_groups=prefix_groups,
        turns=turns,
        tokenizer=tokenizer,
        temperature=temperature,
        ignore_eos=ignore_eos,
        extra_body=_json_object(extra_body),
        percentiles=_floats(percentiles, "--percentiles"),
        label=label,
        seed=seed,
        warmup=warmup,
        where=where,
        python=python,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        slo_e2e_ms=slo_e2e_ms,
    )
    try:
        ctx = build_context(settings, [host], accept_new_host_key=accept_new_host_key)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    ctx.results_dir = out_dir
    with export as ctx.tracing:
        run, transcript = _run(ctx, args, headers, transcripts)
    _show(run, transcript, plot, as_json)


def _run_input(**fields: Any) -> RunBenchmarkInput:
    try:
        return RunBenchmarkInput(**fields)
    except ValidationError as exc:
        fail(
            "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
            ),
            EXIT_USAGE,
        )


def _run(
    ctx: ToolContext, args: RunBenchmarkInput, headers: dict[str, str], transcripts: Path
) -> tuple[BenchRun, Path]:
    """Run the benchmark, audited like a model's call (the headers are not inputs)."""
    phases = [f"c={c}" for c in args.concurrency or []] or [f"{args.request_rate} req/s"]
    # The run is recorded after it ran; its session id is chosen first, so the engine's
    # requests can carry the span the recorded call will have (telemetry on).
    session_id = new_session_id()
    if ctx.tracing is not None:
        ctx.traceparent = ctx.tracing.traceparent(session_id, CLI_CALL_ID)
    try:
        if args.host != LOCAL:
            ctx.host(args.host).check_allowed("run_benchmark")
        with err_console.status(
            f"benchmarking {args.endpoint} on {args.host}: {len(phases)} phase(s) of "
            f"{args.num_prompts} requests ({', '.join(phases)})",
            spinner="dots",
        ):
            result = benchmark(ctx, args, headers)
        transcript = record_cli_call(
            transcripts, ctx, "run_benchmark", args.model_dump(mode="json"), result, session_id
        )
    except (ToolError, HostError, TranscriptError) as exc:
        fail(str(exc), EXIT_ERROR)
    finally:
        ctx.close()
    return BenchRun.model_validate(result.data), transcript


def _show(run: BenchRun, transcript: Path, plot: Path | None, as_json: bool) -> None:
    """Print the run and write its CSV, HTML report and plot; fail when nothing succeeded."""
    records = read_records(run)
    table_csv = write_csv(run)
    page = write_html(run, records)
    out = BenchOutput(
        **run.model_dump(), transcript=str(transcript), csv=str(table_csv), html=str(page)
    )
    if not as_json:
        console.print(run_table(run))
        for line in warnings(run.report):
            console.print(f"[yellow]{escape(line)}[/]")
        console.print(f"records: {escape(run.jsonl)}")
        console.print(f"table: {escape(str(table_csv))}")
        console.print(f"report: {escape(str(page))}")
        console.print(f"transcript: {escape(str(transcript))}")
    png = _maybe_plot(run, plot)  # after the results are out, so a failed plot loses nothing
    if as_json:
        out.plot = str(png) if png else None
        print_json(out)
    elif png:
        console.print(f"plot: {escape(str(png))}")
    if not any(p.completed for p in run.report.phases):
        fail(f"no request succeeded: {first_error(records)}", EXIT_ERROR)


@bench_app.command("compare")
def compare_cmd(
    a: Path = typer.Argument(..., help="The baseline run's JSONL (what `sleuth bench` saved)."),
    b: Path = typer.Argument(..., help="The run to judge against it."),
    factor: list[str] = typer.Option(
        [],
        "--factor",
        help="A setting expected to differ (e.g. model, label, url); others that differ warn.",
    ),
    stat: str = typer.Option("p50,p90", help="Statistics per metric: p50, p90, p99, mean."),
    resamples: int = typer.Option(1000, min=100, max=100_000, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Seeds the bootstrap, so a verdict can be reproduced."),
    as_json: bool = JsonOption,
) -> None:
    """Is B different from A? Per metric, B's change with a 95% bootstrap interval.

    A change is called significant only when its interval excludes zero and it is at
    least 3%, so a busy machine's noise is not called a change. Warns when the runs'
    settings differ in more than the --factor under test, or a run was client-limited.

    Example: sleuth bench compare bench-results/no-spec.jsonl bench-results/spec.jsonl
    """
    names = [s.strip() for s in stat.split(",") if s.strip()]
    stats = [s for s in names if is_stat(s)]
    if not stats or len(stats) != len(names):
        fail(f"--stat {stat!r}: choose from p50, p90, p99, mean (comma-separated)", EXIT_USAGE)
    try:
        report = compare(
            a,
            b,
            seed=seed,
            resamples=resamples,
            stats=stats,
            factor=factor,
        )
    except CompareError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        print_json(report)
        return
    console.print(compare_table(report))
    for line in report.warnings:
        console.print(f"[yellow]warning: {escape(line)}[/]")
    console.print(escape(report.summary))


def _headers(pairs: list[str], api_key: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            fail(f"--header {pair.split(':')[0]!r}...: give NAME:VALUE", EXIT_USAGE)
        headers[name.strip()] = value.strip()
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key:
        headers.setdefault("Authorization", f"Bearer {key}")
    for value in headers.values():
        register_secret(value)
    return headers


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"--extra-body is not JSON: {exc}", EXIT_USAGE)
    if not isinstance(value, dict):
        fail("--extra-body must be a JSON object, e.g. '{\"top_k\": 1}'", EXIT_USAGE)
    return value


def _floats(text: str | None, flag: str, count: int | None = None) -> Any:
    if text is None:
        return None
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"{flag} {text!r}: give numbers separated by commas", EXIT_USAGE)
    if count is not None and len(values) != count:
        fail(f"{flag} {text!r}: give {count} numbers separated by a comma", EXIT_USAGE)
    return values


def _ints(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--concurrency {text!r}: give integers separated by commas, e.g. 1,4,16", EXIT_USAGE)


def _plot_module(required: bool) -> Any:
    """matplotlib's pyplot, checked before the run so a missing extra costs no benchmark."""
    plt = pyplot()
    if plt is None:
        if required:
            fail(
                "--plot needs matplotlib, which is not installed: pip install 'sleuth[plot]' "
                "(or leave out --plot)",
                EXIT_USAGE,
            )
        err_console.print(
            "note: matplotlib is not installed, so the sweep's plot is skipped "
            "(pip install 'sleuth[plot]')"
        )
    return plt


def _maybe_plot(run: BenchRun, plot: Path | None) -> Path | None:
    if not wants_plot(run, plot):
        return None
    plt = _plot_module(required=False)
    return None if plt is None else draw(run, plt, plot)
