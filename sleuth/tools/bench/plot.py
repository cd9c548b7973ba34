"""The PNGs `sleuth bench` writes beside its records (matplotlib, the `plot` extra): latency
percentiles against concurrency, latency CDFs, throughput and goodput against the load, the
goodput search's probes, and the A/B intervals."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sleuth.tools.bench.ab import ABAnalysis
from sleuth.tools.bench.goodput import GoodputSearch
from sleuth.tools.bench.metrics import tpot
from sleuth.tools.bench.models import BenchRun, PhaseMetrics, RequestRecord
from sleuth.tools.bench.render import load_of

MS = 1000.0


def pyplot() -> Any | None:
    """matplotlib's pyplot drawing to files, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def wants_plot(run: BenchRun, target: Path | None) -> bool:
    """A plot was asked for, or the run is a sweep (two or more closed-loop phases)."""
    return target is not None or sum(p.mode == "closed" for p in run.report.phases) >= 2


def draw_run(
    run: BenchRun, records: Sequence[RequestRecord], plt: Any, target: Path | None
) -> list[Path]:
    """A run's plots beside its JSONL (or at `target`): percentiles against concurrency (a
    sweep), latency CDFs per phase, and throughput and goodput against the load."""
    base = target or Path(run.jsonl).with_suffix(".png")
    out = []
    if sum(p.mode == "closed" for p in run.report.phases) >= 2:
        out.append(draw(run, plt, base))
    by_phase = {
        load_of(p): [r for r in records if r.phase == p.phase and not r.warmup and r.ok]
        for p in run.report.phases
    }
    out.append(draw_cdfs(by_phase, plt, base.with_name(base.stem + "-cdf.png")))
    if len(run.report.phases) >= 2:
        out.append(draw_rates(run.report.phases, plt, base.with_name(base.stem + "-rates.png")))
    return out


def draw(run: BenchRun, plt: Any, target: Path | None) -> Path:
    """TTFT, TPOT and E2E p50/p90/p99 against concurrency; beside the JSONL by default."""
    closed = [p for p in run.report.phases if p.mode == "closed"]
    target = target or Path(run.jsonl).with_suffix(".png")
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
    return _save(plt, fig, target)


def draw_cdfs(groups: Mapping[str, Sequence[RequestRecord]], plt: Any, target: Path) -> Path:
    """The cumulative distribution of TTFT, TPOT and E2E, one line per group (a phase, or a
    side of an A/B)."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (title, get) in zip(axes, _LATENCIES, strict=True):
        for name, records in groups.items():
            values = sorted(v * MS for r in records if (v := get(r)) is not None)
            if values:
                ys = [(i + 1) / len(values) for i in range(len(values))]
                ax.step(values, ys, where="post", label=name)
        ax.set_xlabel("ms")
        ax.set_ylabel("share of requests")
        ax.set_title(f"{title} CDF")
        ax.legend()
    return _save(plt, fig, target)


def draw_rates(phases: Sequence[PhaseMetrics], plt: Any, target: Path) -> Path:
    """Output throughput, request throughput and goodput against concurrency or rate."""
    closed = all(p.mode == "closed" for p in phases)
    xs = [float((p.concurrency_target if closed else p.request_rate) or 0.0) for p in phases]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(xs, [p.output_throughput for p in phases], marker="o")
    left.set_ylabel("output tokens/s")
    right.plot(xs, [p.request_throughput for p in phases], marker="o", label="requests/s")
    if any(p.goodput is not None for p in phases):
        right.plot(xs, [p.goodput or 0.0 for p in phases], marker="s", label="goodput")
    right.set_ylabel("requests/s")
    right.legend()
    for ax in (left, right):
        ax.set_xlabel("concurrency" if closed else "request rate (req/s)")
    return _save(plt, fig, target)


def draw_search(found: GoodputSearch, plt: Any, target: Path) -> Path:
    """Goodput, achieved rate and the share meeting the SLOs against the offered rate."""
    probes = sorted(found.probes, key=lambda p: p.rate)
    xs = [p.rate for p in probes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(xs, [p.achieved_rate for p in probes], marker="o", label="achieved")
    left.plot(xs, [p.goodput for p in probes], marker="s", label="goodput")
    left.set_ylabel("requests/s")
    left.legend()
    right.plot(xs, [p.share * 100 for p in probes], marker="o")
    right.axhline(found.target * 100, linestyle="--", color="grey")
    if found.max_rate is not None:
        right.axvline(found.max_rate, linestyle=":", color="green")
    right.set_ylabel("% of requests meeting the SLOs")
    for ax in (left, right):
        ax.set_xlabel("offered rate (req/s)")
    return _save(plt, fig, target)


def draw_intervals(analysis: ABAnalysis, plt: Any, target: Path) -> Path:
    """B's change per metric with its interval (a forest plot); green faster, red slower."""
    rows = [m for m in analysis.metrics if m.change is not None]
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.5))
    colours = {"faster": "green", "slower": "red"}
    for y, m in enumerate(reversed(rows)):
        lo, hi, mid = (100 * (v or 0.0) for v in (m.ci_low, m.ci_high, m.change))
        colour = colours.get(m.verdict, "grey")
        ax.plot([lo, hi], [y, y], color=colour, linewidth=2)
        ax.plot([mid], [y], marker="o", color=colour)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{m.metric} {m.stat}".strip() for m in reversed(rows)])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"B against A, % ({analysis.level:.0%} interval)")
    ax.set_title(f"A/B over {analysis.pairs} repeats ({analysis.order})")
    return _save(plt, fig, target)


def _ttft(r: RequestRecord) -> float | None:
    return None if r.t_first is None else r.t_first - r.t_send


def _e2e(r: RequestRecord) -> float | None:
    return None if r.t_last_token is None else r.t_last_token - r.t_send


_LATENCIES: tuple[tuple[str, Callable[[RequestRecord], float | None]], ...] = (
    ("TTFT", _ttft),
    ("TPOT", tpot),
    ("E2E", _e2e),
)


def _save(plt: Any, fig: Any, target: Path) -> Path:
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
