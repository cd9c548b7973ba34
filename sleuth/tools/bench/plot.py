"""The PNG of a closed-loop sweep: latency percentiles against concurrency (matplotlib, the
`plot` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sleuth.tools.bench.models import BenchRun


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
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target
