"""The tables `sleuth bench` prints: a run's phases, the A/B verdicts of a comparison (of two
runs, or of paired repeats), and the probes of a goodput search."""

from __future__ import annotations

from rich.table import Table

from sleuth.tools.bench.ab import ABAnalysis
from sleuth.tools.bench.compare import CompareReport
from sleuth.tools.bench.goodput import GoodputSearch
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


VERDICT_STYLE = {"faster": "[green]faster[/]", "slower": "[red]slower[/]"}


def ab_table(analysis: ABAnalysis, title: str) -> Table:
    """One row per metric: A's and B's mean over the repeats, B's change, its interval and
    the verdict."""
    table = Table(title=title)
    for name in ("metric", "A", "B", "change", f"{analysis.level:.0%} CI", "p (Holm)", "verdict"):
        table.add_column(name, justify="left" if name in ("metric", "verdict") else "right")
    for m in analysis.metrics:
        ci = (
            "-"
            if m.ci_low is None or m.ci_high is None
            else f"{m.ci_low * 100:+.2f}%..{m.ci_high * 100:+.2f}%"
        )
        table.add_row(
            f"{m.metric} {m.stat} ({m.unit})".replace("  ", " "),
            _mean(m.a),
            _mean(m.b),
            "-" if m.change is None else f"{m.change * 100:+.2f}%",
            ci,
            "-" if m.p_adjusted is None else f"{m.p_adjusted:.3g}",
            VERDICT_STYLE.get(m.verdict, m.verdict),
        )
    return table


def repeats_table(report: CompareReport) -> Table:
    """The paired verdicts of stored runs, phase by phase, in one table."""
    first = report.repeats[0]
    title = f"B: {report.b}\nagainst A: {report.a}\n{first.pairs} pairs, order {first.order}"
    if len(report.repeats) == 1:
        return ab_table(first, title)
    table = Table(title=title)
    for name in ("phase", "metric", "change", "verdict"):
        table.add_column(name)
    for k, analysis in enumerate(report.repeats):
        for m in analysis.metrics:
            change = "-" if m.change is None else f"{m.change * 100:+.2f}%"
            table.add_row(str(k), f"{m.metric} {m.stat}", change, m.verdict)
    return table


def search_table(found: GoodputSearch) -> Table:
    table = Table(title=f"goodput search: {found.target:.0%} of requests within the SLO")
    for name in ("rate req/s", "achieved req/s", "met SLO", "goodput req/s", "s", "verdict"):
        table.add_column(name, justify="right")
    for p in found.probes:
        table.add_row(
            f"{p.rate:.3g}",
            f"{p.achieved_rate:.2f}",
            f"{p.share:.1%}",
            f"{p.goodput:.2f}",
            f"{p.elapsed_s:.0f}",
            "[green]meets[/]" if p.meets else "[red]misses[/]",
        )
    return table


def _mean(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    return f"{sum(got) / len(got):.2f}" if got else "-"
