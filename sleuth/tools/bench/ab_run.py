"""ab_benchmark: two configurations benchmarked in turns (ABBA), and the verdict per metric.

A configuration is a server already running (`endpoint`) or one that this tool launches
with `launch` (launch_server's inputs: the same engine and model with another flag set).
Launches and stops go through launch_server and stop_server, so each is approved and
permitted like any mutating call; a server is relaunched whenever the side changes.

The runs are kept under results_dir/ab-STAMP/{A,B}/ with the verdicts in ab.json, so
`sleuth bench compare DIR/A DIR/B` recomputes them from the records.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sleuth.errors import ErrorKind
from sleuth.tools.bench.ab import ABAnalysis, Side, abba, analyse
from sleuth.tools.bench.bench_input import RunBenchmarkInput, load_python
from sleuth.tools.bench.models import BenchRun
from sleuth.tools.bench.run_benchmark import benchmark
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError
from sleuth.tools.serving.launch_input import LaunchServerInput
from sleuth.transcripts.results import ToolResult


class ABSide(BaseModel):
    """One configuration: a running server, or a launch of one."""

    model_config = ConfigDict(extra="forbid")
    endpoint: str | None = Field(
        None, description="The running server as the host sees it, http://127.0.0.1:PORT."
    )
    launch: dict[str, Any] | None = Field(
        None,
        description="launch_server inputs (engine, model_path, port, extra_args, env, ...) "
        "to start this configuration; the benchmark then loads http://127.0.0.1:PORT.",
    )
    label: str | None = Field(None, max_length=200, description="A name, e.g. spec-on.")

    @model_validator(mode="after")
    def _one_way(self) -> ABSide:
        if (self.endpoint is None) == (self.launch is None):
            raise ValueError("give a side exactly one of endpoint and launch")
        return self

    def url(self) -> str:
        if self.endpoint is not None:
            return self.endpoint
        return f"http://127.0.0.1:{(self.launch or {}).get('port', 30000)}"


class ABBenchmarkInput(ToolInput):
    a: ABSide = Field(description="Configuration A, the baseline.")
    b: ABSide = Field(description="Configuration B, judged against A.")
    load: dict[str, Any] = Field(
        description="run_benchmark inputs for every run, without host and endpoint: one "
        'load only, e.g. {"model": "m", "concurrency": [8], "num_prompts": 64}.'
    )
    repeats: int = Field(5, ge=2, le=50, description="Runs of each side, in ABBA order.")
    level: float = Field(0.95, gt=0.5, lt=1.0, description="Confidence level of the verdicts.")
    min_effect: float = Field(
        0.0, ge=0.0, lt=1.0, description="Smallest relative change called a difference."
    )

    def chosen_python(self) -> str | None:
        """The load's `python` (each side's launch is decided as its own launch_server)."""
        return load_python(self.load)


class ABRunRecord(BaseModel):
    side: Side
    repeat: int
    position: int = Field(description="Where in the run order it ran, from 0.")
    seed: int
    jsonl: str
    started: float = Field(description="Epoch seconds when the run began.")
    server_id: str | None = None


class ABResult(BaseModel):
    """What ab_benchmark returns as data (and saves as ab.json)."""

    host: str
    folder: str
    a: ABSide
    b: ABSide
    load: dict[str, Any]
    runs: list[ABRunRecord]
    analysis: ABAnalysis


@tool(mutating=True)
def ab_benchmark(ctx: ToolContext, args: ABBenchmarkInput) -> ToolResult:
    """Is configuration B faster or slower than A, or not detectably different?

    Runs the same load (run_benchmark inputs in `load`) against A and B in turns, ABBA
    order, `repeats` runs each, each run with its warm-up requests and its own seed (so no
    run re-sends another's prompts into a prefix cache). A side is a running server
    (`endpoint`) or a launch (`launch`: launch_server inputs, e.g. the same model with
    other extra_args), relaunched when the side changes and stopped at the end. Reports
    per metric (TTFT, TPOT, ITL, E2E at p50/p90/p99; output and request throughput) B's
    change with a paired t-interval over the repeats and a verdict at `level`,
    Holm-corrected over the metrics.
    """
    return run_ab(ctx, args)


def run_ab(
    ctx: ToolContext, args: ABBenchmarkInput, headers: dict[str, str] | None = None
) -> ToolResult:
    """ab_benchmark with request headers that travel on stdin (see run_benchmark)."""
    started = time.monotonic()
    folder = (ctx.results_dir / f"ab-{datetime.now():%Y%m%d-%H%M%S-%f}").resolve()
    turns = _Turns(ctx, args, folder, headers)
    try:
        for position, side in enumerate(abba(args.repeats)):
            turns.run(position, side)
    finally:
        turns.stop()
    phases = {s: [r.report.phases[0] for r in turns.reports[s]] for s in ("A", "B")}
    outcome = ABResult(
        host=args.host,
        folder=str(folder),
        a=args.a,
        b=args.b,
        load=args.load,
        runs=turns.records,
        analysis=analyse(
            phases["A"],
            phases["B"],
            order="".join(abba(args.repeats)),
            interleaved=True,
            level=args.level,
            min_effect=args.min_effect,
        ),
    )
    (folder / "ab.json").write_text(outcome.model_dump_json(indent=2), encoding="utf-8")
    return ToolResult(
        ok=True,
        output=render_ab(outcome),
        data=outcome.model_dump(mode="json"),
        argv=turns.argvs,
        duration_s=time.monotonic() - started,
    )


class _Turns:
    """The runs in order, with the server of a launched side up while its turns last."""

    def __init__(
        self,
        ctx: ToolContext,
        args: ABBenchmarkInput,
        folder: Path,
        headers: dict[str, str] | None,
    ) -> None:
        self.ctx, self.args, self.folder, self.headers = ctx, args, folder, headers
        self.sides: dict[Side, ABSide] = {"A": args.a, "B": args.b}
        self.loads = {s: _load(args, side) for s, side in self.sides.items()}
        for side in self.sides.values():  # both launches checked before either starts
            if side.launch is not None:
                _launch_input(args.host, side)
        self.up: tuple[Side, str] | None = None
        self.records: list[ABRunRecord] = []
        self.reports: dict[Side, list[BenchRun]] = {"A": [], "B": []}
        self.argvs: list[list[str]] = []

    def run(self, position: int, side: Side) -> None:
        launched = self.sides[side].launch is not None
        if self.up is not None and (not launched or self.up[0] != side):
            self.stop()
        if launched and self.up is None:
            self.up = (side, _launch(self.ctx, self.args.host, self.sides[side]))
        base = self.loads[side]
        load = base.model_copy(update={"seed": base.seed + position})
        began = time.time()
        result = benchmark(replace(self.ctx, results_dir=self.folder / side), load, self.headers)
        run = BenchRun.model_validate(result.data)
        self.reports[side].append(run)
        self.argvs += result.argv
        self.records.append(
            ABRunRecord(
                side=side,
                repeat=len(self.reports[side]) - 1,
                position=position,
                seed=load.seed,
                jsonl=run.jsonl,
                started=began,
                server_id=self.up[1] if self.up else None,
            )
        )

    def stop(self) -> None:
        if self.up is not None:
            server_id, self.up = self.up[1], None
            _stop(self.ctx, self.args.host, server_id)


def render_ab(result: ABResult) -> str:
    """The verdicts as lines for the model: the summary first, then one line per metric."""
    analysis = result.analysis
    head = f"A/B on {result.host}: {analysis.pairs} repeats, order {analysis.order}"
    lines = [head, f"summary: {analysis.summary}"]
    lines += [m.sentence for m in analysis.metrics]
    lines += [f"warning: {w}" for w in analysis.warnings]
    lines.append(f"records: {result.folder}")
    return "\n".join(lines)


def _load(args: ABBenchmarkInput, side: ABSide) -> RunBenchmarkInput:
    """The run_benchmark input of one side; one load only, so each run yields one figure
    per metric."""
    given = {k: v for k, v in args.load.items() if k not in ("host", "endpoint")}
    try:
        load = RunBenchmarkInput(host=args.host, endpoint=side.url(), **given)
    except ValidationError as exc:
        raise ToolError(f"ab_benchmark load: {exc}", ErrorKind.INVALID_INPUT) from None
    if load.concurrency is not None and len(load.concurrency) != 1:
        raise ToolError(
            "ab_benchmark compares one load: give a single concurrency, e.g. [8]",
            ErrorKind.INVALID_INPUT,
        )
    label = side.label or ("A" if side is args.a else "B")
    return load.model_copy(update={"label": label})


def _launch_input(host: str, side: ABSide) -> LaunchServerInput:
    try:
        return LaunchServerInput.model_validate({**(side.launch or {}), "host": host})
    except ValidationError as exc:
        what = side.label or "a side"
        raise ToolError(f"ab_benchmark launch of {what}: {exc}", ErrorKind.INVALID_INPUT) from None


def _launch(ctx: ToolContext, host: str, side: ABSide) -> str:
    """Start a side's server through launch_server (approved like any launch)."""
    result = _subcall(ctx, "launch_server", {**(side.launch or {}), "host": host})
    if not result.ok or not isinstance(result.data, dict):
        raise ToolError(
            f"launching {side.label or 'a side'} failed: {result.error or result.output}",
            ErrorKind(result.error_kind or ErrorKind.FAILED),
        )
    server_id: str = result.data["server_id"]
    return server_id


def _stop(ctx: ToolContext, host: str, server_id: str) -> None:
    result = _subcall(ctx, "stop_server", {"host": host, "server_id": server_id})
    if not result.ok:
        raise ToolError(
            f"stopping {server_id} failed: {result.error or result.output}", ErrorKind.FAILED
        )


def _subcall(ctx: ToolContext, name: str, raw: dict[str, Any]) -> ToolResult:
    """A launch or stop through the caller's call pipeline: approved and recorded like any."""
    if ctx.subcall is None:
        raise ToolError(
            f"ab_benchmark runs {name} only through a call pipeline", ErrorKind.INTERNAL
        )
    return ctx.subcall(name, raw)
