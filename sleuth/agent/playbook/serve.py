"""Serve and benchmark: launch a server, benchmark it, stop it (the calls need permission).
A question that names speculative decoding gets the A/B plan in `speculative` instead."""

from __future__ import annotations

import re

from sleuth.agent.playbook.plan import Family, Plan, Question, Report, summary_text
from sleuth.agent.playbook.serving import phase_line, serve_and_bench
from sleuth.agent.playbook.speculative import SPECULATIVE_WORDS, plan_speculative_ab
from sleuth.tools.bench.models import BenchRun


def plan_serve(q: Question) -> Plan:
    model = next(iter(q.paths), None)
    if model is None:
        return (
            "To serve and benchmark, name the model folder in the question, e.g. "
            "'serve /models/X with sglang and benchmark at concurrency 8'."
        )
    engine = "vllm" if q.has("vllm") else "sglang"
    match = re.search(r"concurrency (\d+)", q.text.lower())
    concurrency = int(match.group(1)) if match else 8
    port_match = re.search(r"port (\d+)", q.text.lower())
    port = int(port_match.group(1)) if port_match else 30000 if engine == "sglang" else 8000
    if q.has(*SPECULATIVE_WORDS):
        return (yield from plan_speculative_ab(q, engine, model, port, concurrency))
    run = yield from serve_and_bench(q, engine, model, port, concurrency, None, 128)
    if isinstance(run, Report):
        yield [run]
        return summary_text([run])
    bench, stop = run
    done = bench.model(BenchRun)
    p = done.report.phases[0] if done and done.report.phases else None
    if p is None or not p.completed:
        claim = f"The benchmark of {engine} serving {model} did not complete."
    else:
        claim = (
            f"{engine} serving {model} at concurrency {concurrency}: output throughput "
            f"{p.output_throughput:.1f} tok/s, {p.request_throughput:.2f} req/s, "
            f"TTFT p50 {p.ttft.p50:.1f} ms, TPOT p50 {p.tpot.p50:.2f} ms "
            f"({p.completed}/{p.requests} requests ok)"
        )
    report = Report(
        claim,
        "unknown" if p is None or not p.completed else "yes",
        0.8,
        [(bench, phase_line(bench)), (stop, stop.line("stop"))],
    )
    yield [report]
    return summary_text([report])


FAMILY = Family(
    name="serve",
    help="serve and benchmark: launch a server, benchmark it, stop it (needs permission); "
    "with speculative decoding named, the same load without and with it, compared",
    plan=plan_serve,
    words=(
        "serve",
        "serving",
        "gain",
        "launch",
        "benchmark",
        "throughput",
        "tok/s",
        "tokens per second",
        "latency",
        "ttft",
    ),
    rank=10,
)
