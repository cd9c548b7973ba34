"""The tables `sleuth bench` prints: a run's phases, and the A/B verdicts of a comparison."""

from __future__ import annotations

from rich.table import Table

from sleuth.tools.bench.compare import CompareReport
from sleuth.tools.bench.models import BenchRun, PhaseMetrics
from sleuth.tools.bench.render import load_of, phase_cells

RUN_COLUMNS = (
    "load",
    "ok/n",
    "prompt tok",
    "TTFT p50/p99",
    "TTFT sched p99",
    "TPOT p50/p99",
    "ITL p50",
    "E2E p50/p99",
    "req/s",
    "out tok/s",
    "conc",
    "goodput",
)


def run_table(run: BenchRun) -> Table:
    table = Table(title=f"benchmark on {run.host} (load generator: {run.where})")
    for name in RUN_COLUMNS:
        table.add_column(name, justify="right")
    for p in run.report.phases:
        table.add_row(load_of(p), f"{p.completed}/{p.requests}", _prompt_cell(p), *phase_cells(p))
    return table


def _prompt_cell(p: PhaseMetrics) -> str:
    """Mean prompt tokens, marked when they are the client's word count, not the server's."""
    if p.prompt_tokens.mean is None:
        return "-"
    mark = {"server": "", "client tokenizer": " (tok)", "words": " (words)"}
    return f"{p.prompt_tokens.mean:.0f}{mark[p.prompt_tokens_source]}"


def compare_table(report: CompareReport) -> Table:
    table = Table(title=f"B: {report.b}\nagainst A: {report.a}")
    for name in ("phase", "metric", "A", "B", "change", "95% CI", "verdict"):
        table.add_column(name, justify="right" if name not in ("metric", "verdict") else "left")
    for phase in report.phases:
        for m in phase.metrics:
            ci = (
                "-"
                if m.ci_low is None or m.ci_high is None
                else f"{m.ci_low * 100:+.1f}%..{m.ci_high * 100:+.1f}%"
            )
            change = "-" if m.rel_diff is None else f"{m.rel_diff * 100:+.1f}%"
            verdict = (
                ("[green]lower[/]" if (m.rel_diff or 0) < 0 else "[red]higher[/]")
                if m.significant
                else "within noise"
            )
            table.add_row(
                phase.load_a,
                f"{m.metric} {m.stat}",
                "-" if m.a is None else f"{m.a:.1f}",
                "-" if m.b is None else f"{m.b:.1f}",
                change,
                ci,
                verdict,
            )
    return table
