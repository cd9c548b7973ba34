"""goodput_search: the highest request rate at which a target share of requests still meets
the latency SLOs, by bisection over open-loop runs of run_benchmark."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, ValidationError

from sleuth.errors import ErrorKind
from sleuth.tools.bench.bench_input import RunBenchmarkInput, load_python
from sleuth.tools.bench.goodput import GoodputSearch, render_search, search
from sleuth.tools.bench.models import BenchRun, PhaseMetrics, Slo
from sleuth.tools.bench.run_benchmark import benchmark
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError
from sleuth.transcripts.results import ToolResult


class GoodputSearchInput(ToolInput):
    load: dict[str, Any] = Field(
        description="run_benchmark inputs for every probe except host and request_rate, e.g. "
        '{"endpoint": "http://127.0.0.1:8000", "model": "m", "duration_s": 30}.'
    )
    slo: Slo = Field(description="Limits in ms a request must meet: ttft_ms, tpot_ms, e2e_ms.")
    target: float = Field(0.9, gt=0, le=1, description="Share of requests that must meet them.")
    rate_low: float = Field(gt=0, le=100_000, description="Lowest rate to try, requests/s.")
    rate_high: float = Field(gt=0, le=100_000, description="Highest rate to try, requests/s.")
    max_steps: int = Field(6, ge=2, le=30, description="At most this many probes.")
    time_budget_s: float = Field(
        600.0, gt=0, le=86_400, description="No probe starts that would likely pass this."
    )

    def chosen_python(self) -> str | None:
        return load_python(self.load)


@tool(mutating=True)
def goodput_search(ctx: ToolContext, args: GoodputSearchInput) -> ToolResult:
    """The maximum request rate at which a target share (default 90%) of requests still meets
    the latency SLOs (TTFT, TPOT, E2E in ms): open-loop runs of run_benchmark at rate_low,
    rate_high, then bisection between them, bounded by max_steps probes and a time budget.
    Reports every probe (share meeting the SLOs, goodput, achieved rate) and the bracket
    the answer lies in.
    """
    return find_max_rate(ctx, args)


def find_max_rate(
    ctx: ToolContext, args: GoodputSearchInput, headers: dict[str, str] | None = None
) -> ToolResult:
    """goodput_search with request headers that travel on stdin (see run_benchmark)."""
    if all(v is None for v in (args.slo.ttft_ms, args.slo.tpot_ms, args.slo.e2e_ms)):
        raise ToolError(
            "give at least one SLO: ttft_ms, tpot_ms or e2e_ms", ErrorKind.INVALID_INPUT
        )
    base = _base(args)
    argvs: list[list[str]] = []
    started = time.monotonic()

    def probe(rate: float) -> tuple[PhaseMetrics, str]:
        load = base.model_copy(update={"request_rate": rate, "seed": base.seed + len(argvs)})
        result = benchmark(ctx, load, headers)
        argvs.extend(result.argv)
        run = BenchRun.model_validate(result.data)
        return run.report.phases[0], run.jsonl

    found: GoodputSearch = search(
        probe,
        slo=args.slo,
        low=args.rate_low,
        high=args.rate_high,
        target=args.target,
        max_steps=args.max_steps,
        budget_s=args.time_budget_s,
    )
    return ToolResult(
        ok=True,
        output=render_search(found),
        data=found.model_dump(mode="json"),
        argv=argvs,
        duration_s=time.monotonic() - started,
    )


def _base(args: GoodputSearchInput) -> RunBenchmarkInput:
    slo = {f"slo_{k}": v for k, v in args.slo.model_dump().items()}
    dropped = ("host", "request_rate", "concurrency", *slo)
    given = {k: v for k, v in args.load.items() if k not in dropped}
    try:
        return RunBenchmarkInput(host=args.host, request_rate=args.rate_low, **given, **slo)
    except ValidationError as exc:
        raise ToolError(f"goodput_search load: {exc}", ErrorKind.INVALID_INPUT) from None
