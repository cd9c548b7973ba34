"""What reading a live engine costs: engine_status with a window of W seconds (the goal:
W plus under 0.5 s), without one, a named PromQL question against a local Prometheus (the
goal: under 1 s), and engine_log_series over a long log.

    python -m benchmarks.live_engines [--repeats 5] [--out benchmarks/results/live_engines.md]

The engine is a prometheus_client /metrics page on 127.0.0.1 whose counters move at known
rates (tests/live_servers.py, vLLM's series names); Prometheus is Debian's package, started
on 127.0.0.1 scraping it every second (tests/prometheus_server.py). Every call takes the
call pipeline (`execute`), as a model's would: validation, the server_processes subcall,
redaction.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import write_results
from benchmarks.ssh_calls import table
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits, PrometheusSettings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests.live_servers import FIXTURES, Moving
from tests.prometheus_server import PrometheusServer, missing_reason

WINDOWS = (0, 2, 5, 10)
QUESTIONS = ("request_rate", "ttft_p99", "acceptance_length", "kv_usage_peak")


def context(root: Path, prom: PrometheusServer | None = None) -> ToolContext:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(root)]), Limits())
    settings = PrometheusSettings(url=prom.url) if prom else PrometheusSettings()
    return ToolContext(hosts={"local": host}, prometheus=settings)


def timed(ctx: ToolContext, tool: str, args: dict[str, Any], repeats: int) -> list[float]:
    spent = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = execute(ctx, tool, {"host": "local", **args})
        spent.append(time.perf_counter() - started)
        assert result.ok, result.output
    return spent


def python_starts(ctx: ToolContext, repeats: int) -> list[float]:
    """The host's bare `python3 -c pass`: the floor every host program's run pays."""
    host = ctx.host("local")
    spent = []
    for _ in range(repeats):
        started = time.perf_counter()
        host.run([host.config.python, "-c", "pass"])
        spent.append(time.perf_counter() - started)
    return spent


def measure(work: Path, repeats: int) -> dict[str, list[float]]:
    got: dict[str, list[float]] = {}
    with Moving(tick=0.1) as engine:
        ctx = context(work)
        got["python"] = []
        for w in WINDOWS:
            args = {"port": engine.port, "window_s": w}
            spent, starts = [], []
            for _ in range(repeats):  # each call beside a bare Python start, a moment apart
                starts += python_starts(ctx, 1)
                spent += timed(ctx, "engine_status", args, 1)
            got[f"window {w}"], got[f"start {w}"] = spent, starts
            got["python"] += starts
        prom = PrometheusServer(work / "prom", [f"127.0.0.1:{engine.port}"])
        try:
            prom.wait_for_samples("vllm:generation_tokens_total", 5)
            ctx = context(work, prom)
            for q in QUESTIONS:
                args = {"question": q, "range_s": 60}
                got[q] = timed(ctx, "query_metrics", args, repeats * 4)
        finally:
            prom.close()
    lines = (FIXTURES / "sglang-decode.log").read_text().splitlines()
    (work / "big.log").write_text("\n".join(lines * (100_000 // len(lines))) + "\n")
    got["log"] = timed(
        context(work), "engine_log_series", {"path": "big.log", "lines": 100_000}, repeats
    )
    return got


def report(got: dict[str, list[float]], repeats: int) -> str:
    rows = []
    start = statistics.median(got["python"])
    for w in WINDOWS:
        spent = got[f"window {w}"]
        over = [s - w for s in spent]
        beyond = [o - b for o, b in zip(over, got[f"start {w}"], strict=True)]
        rows.append([f"`engine_status` window_s={w}", f"{statistics.median(spent):.2f}",
                     f"{max(spent):.2f}", f"{statistics.median(over):.2f}",
                     f"{statistics.median(beyond):.2f}"])  # fmt: skip
    qrows = [
        [f"`query_metrics` {q}", f"{statistics.median(got[q]) * 1000:.0f}",
         f"{max(got[q]) * 1000:.0f}"]
        for q in QUESTIONS
    ]  # fmt: skip
    log = got["log"]
    return f"""## Live engines (`benchmarks/live_engines.py`)

Reproduce: `python -m benchmarks.live_engines --repeats {repeats}` (a /metrics page and a
Prometheus on 127.0.0.1; needs Debian's `prometheus`).

`engine_status` against a prometheus_client /metrics page moving at known rates (vLLM's
series), every call through the call pipeline (its `server_processes` subcall and the host
program's start included), {repeats} calls each. Goal: a window of W seconds costs W plus
under 0.5 s.

{table(["call", "median s", "max s", "over W, median s", "over W less a Python start, s"], rows)}

A bare `python3 -c pass` on the same host, run just before each call, took {start:.2f} s
(median of {len(got["python"])}): the floor any host program's run pays, here on a machine
shared with other work; the last column is each call's time over W less the start measured
beside it. engine_status pays it once with a port given (its `server_processes` subcall
runs beside the probe), twice without one.

`query_metrics` named questions (over the last 60 s, grouped by model_name) against
Prometheus 2.42 (Debian) scraping that page every second, {repeats * 4} calls each; each
question is two queries (which series Prometheus holds, then the PromQL) plus, once per
call, which engine. Goal: under 1 s.

{table(["call", "median ms", "max ms"], qrows)}

`engine_log_series` over a 100,000-line SGLang log (the real decode/prefill lines of
`tests/fixtures/live/sglang-decode.log`, repeated): median {statistics.median(log):.2f} s,
max {max(log):.2f} s. Load average {os.getloadavg()[0]:.1f} on this machine's 2 cores when
the run ended.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/live_engines.md"))
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        got = measure(Path(tmp), args.repeats)
        shutil.rmtree(tmp, ignore_errors=True)
    write_results(args.out, report(got, args.repeats))


if __name__ == "__main__":
    main()
