"""What speculative decoding gains: the same workload without and with it, compared."""

from __future__ import annotations

from sleuth.agent.playbook.plan import Call, Plan, Question, Report, summary_text
from sleuth.agent.playbook.serving import phase_line, serve_and_bench
from sleuth.tools.bench.compare import CompareReport, MetricDiff
from sleuth.tools.bench.models import BenchRun

SPECULATIVE_WORDS = ("speculative", "mtp", "nextn", "draft", "eagle")


def plan_speculative_ab(q: Question, engine: str, model: str, port: int, concurrency: int) -> Plan:
    """Serve and benchmark without speculative decoding, then with it, and compare the two."""
    algorithm = "EAGLE" if q.has("eagle") else "NEXTN"
    runs = []
    for speculative in (None, {"algorithm": algorithm}):
        run = yield from serve_and_bench(q, engine, model, port, concurrency, speculative, 64)
        if isinstance(run, Report):
            yield [run]
            return summary_text([run])
        runs.append(run)
    (off, _), (on, stop) = runs
    records = [r.model(BenchRun) for r in (off, on)]
    paths = [r.jsonl for r in records if r is not None and r.jsonl]
    if len(paths) < 2:
        failed = off if off.is_error else on
        report = Report(
            f"The benchmarks of {engine} serving {model} without and with speculative "
            "decoding did not both complete.",
            "unknown",
            0.7,
            [(failed, failed.line("error") or failed.line("fail"))],
        )
        yield [report]
        return summary_text([report])
    (verdict,) = yield [
        Call(
            "compare_benchmarks",
            {"host": q.host, "baseline": paths[0], "candidate": paths[1], "factor": ["label"]},
        )
    ]
    compared = verdict.model(CompareReport)
    diffs: dict[tuple[str, str], MetricDiff] = {
        (m.metric, m.stat): m
        for phase in (compared.phases[:1] if compared else [])
        for m in phase.metrics
    }
    tpot, e2e = diffs.get(("tpot", "p50")), diffs.get(("e2e", "p50"))
    if tpot is not None and tpot.significant and (tpot.rel_diff or 0) < 0:
        answer = "yes"
    elif any(m.significant for m in (tpot, e2e) if m is not None):
        answer = "no"
    else:
        answer = "unknown"
    claim = (
        f"{engine} serving {model} at concurrency {concurrency}, speculative decoding "
        f"({algorithm}) against none: {compared.summary if compared else 'no comparison'}"
    )
    report = Report(
        claim,
        answer,
        0.8,
        [
            (verdict, verdict.line(tpot.sentence) if tpot else None),
            (verdict, verdict.line(e2e.sentence) if e2e else None),
            (on, phase_line(on)),
            (stop, stop.line("stop")),
        ],
    )
    yield [report]
    return summary_text([report])
