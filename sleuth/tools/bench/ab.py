"""A/B verdicts over interleaved repeats: is B faster, slower, or not detectably different?

```python
analysis = analyse(a_phases, b_phases, order="ABBAABBAAB", level=0.95)
analysis.metrics[0].verdict      # "slower"
analysis.metrics[0].sentence     # "TPOT p50: B is slower by 3.0% (95% CI +2.9% to +3.1%)"
```

Each repeat runs A and B once (in ABBA order, so a drift of the machine and the advantage
of running second fall on both sides alike); each run gives one figure per metric (a
percentile of its requests, or its throughput), and the pairs of figures are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from sleuth.tools.bench.models import Dist, PhaseMetrics
from sleuth.tools.bench.stats import PairedEstimate, holm, paired_log_ratio

Side = Literal["A", "B"]
Better = Literal["lower", "higher"]
Verdict = Literal["faster", "slower", "no detectable difference", "not comparable"]

METHOD = (
    "paired t-interval over repeats on log(B/A): each repeat's A and B figures form a pair, "
    "and the interval of the mean log ratio uses Student's t with (repeats - 1) degrees of "
    "freedom. Not a bootstrap: with 5 repeats a bootstrap has only 126 distinct resamples "
    "and its percentile interval is too narrow (it undercovers at such small n), while the "
    "t quantile (2.78 for 4 degrees of freedom) widens the interval for exactly that "
    "uncertainty. Verdicts are Holm-corrected over the metrics, so an A/A comparison calls "
    "any metric different at most (1 - level) of the time."
)


@dataclass(frozen=True)
class Figure:
    """One figure a run yields for the comparison, and which direction is better."""

    metric: str
    stat: str
    unit: str
    better: Better
    get: Callable[[PhaseMetrics], float | None]

    @property
    def name(self) -> str:
        return f"{self.metric.upper()} {self.stat}".strip()


def _pct(field: str, stat: str) -> Callable[[PhaseMetrics], float | None]:
    def get(p: PhaseMetrics) -> float | None:
        dist: Dist = getattr(p, field)
        value: float | None = getattr(dist, stat)
        return value

    return get


LATENCIES = (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl_token"), ("e2e", "e2e"))
FIGURES: tuple[Figure, ...] = (
    *(
        Figure(name, stat, "ms", "lower", _pct(field, stat))
        for name, field in LATENCIES
        for stat in ("p50", "p90", "p99")
    ),
    Figure("output throughput", "", "tok/s", "higher", lambda p: p.output_throughput),
    Figure("request throughput", "", "req/s", "higher", lambda p: p.request_throughput),
    Figure("goodput", "", "req/s", "higher", lambda p: p.goodput),
)


class MetricVerdict(BaseModel):
    metric: str
    stat: str
    unit: str
    better: Better
    a: list[float | None] = Field(description="A's figure in each repeat.")
    b: list[float | None] = Field(description="B's figure in each repeat.")
    change: float | None = Field(
        None, description="B/A - 1: the geometric mean of the repeats' ratios."
    )
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = Field(None, description="Holm-adjusted over the metrics.")
    verdict: Verdict
    sentence: str


class ABAnalysis(BaseModel):
    method: str = METHOD
    level: float
    min_effect: float = Field(description="Smallest |change| called a difference.")
    pairs: int
    order: str = Field(description="The runs in the order they ran, e.g. ABBAABBAAB.")
    interleaved: bool = Field(description="Each pair's two runs ran back to back.")
    metrics: list[MetricVerdict]
    warnings: list[str] = Field(default_factory=list)
    summary: str


def abba(repeats: int) -> list[Side]:
    """The run order: AB, BA, AB, ... so each side runs first in half the repeats."""
    order: list[Side] = []
    for k in range(repeats):
        order += ["A", "B"] if k % 2 == 0 else ["B", "A"]
    return order


def pairing(starts: Sequence[tuple[Side, float]]) -> tuple[str, bool, list[tuple[int, int]]]:
    """From each run's side and start time: the order they ran in, whether the pairs are
    interleaved (the i-th A and the i-th B ran back to back, nothing between them), and
    the pairs as (index of the A run, index of the B run) into `starts`."""
    ranked = sorted(range(len(starts)), key=lambda i: starts[i][1])
    order = "".join(starts[i][0] for i in ranked)
    position = {i: rank for rank, i in enumerate(ranked)}
    a_runs = [i for i in ranked if starts[i][0] == "A"]
    b_runs = [i for i in ranked if starts[i][0] == "B"]
    pairs = list(zip(a_runs, b_runs, strict=False))
    back_to_back = all(abs(position[a] - position[b]) == 1 for a, b in pairs)
    return order, bool(pairs) and back_to_back and len(a_runs) == len(b_runs), pairs


def analyse(
    a: Sequence[PhaseMetrics],
    b: Sequence[PhaseMetrics],
    *,
    order: str,
    interleaved: bool,
    level: float = 0.95,
    min_effect: float = 0.0,
) -> ABAnalysis:
    """Verdicts for B against A from the paired runs a[i], b[i] (one phase each)."""
    figures = [f for f in FIGURES if _present(f, a) and _present(f, b)]
    estimates = [
        paired_log_ratio(_values(f, a), _values(f, b), level) if len(a) == len(b) else None
        for f in figures
    ]
    adjusted = holm([e.p_value for e in estimates if e is not None])
    verdicts: list[MetricVerdict] = []
    for figure, est in zip(figures, estimates, strict=True):
        p_adj = adjusted.pop(0) if est is not None else None
        verdicts.append(_verdict(figure, a, b, est, p_adj, level, min_effect, len(figures)))
    warnings = _warnings(order, interleaved, len(a), len(b))
    return ABAnalysis(
        level=level,
        min_effect=min_effect,
        pairs=min(len(a), len(b)),
        order=order,
        interleaved=interleaved,
        metrics=verdicts,
        warnings=warnings,
        summary=_summary(verdicts, level, interleaved),
    )


def _present(figure: Figure, runs: Sequence[PhaseMetrics]) -> bool:
    return any(figure.get(p) is not None for p in runs)


def _values(figure: Figure, runs: Sequence[PhaseMetrics]) -> list[float]:
    return [v if (v := figure.get(p)) is not None else 0.0 for p in runs]


def _verdict(
    figure: Figure,
    a: Sequence[PhaseMetrics],
    b: Sequence[PhaseMetrics],
    est: PairedEstimate | None,
    p_adj: float | None,
    level: float,
    min_effect: float,
    family: int,
) -> MetricVerdict:
    base = {
        "metric": figure.metric,
        "stat": figure.stat,
        "unit": figure.unit,
        "better": figure.better,
        "a": [figure.get(p) for p in a],
        "b": [figure.get(p) for p in b],
    }
    if est is None or p_adj is None:
        why = "needs two or more repeats on each side" if len(a) < 2 else "a side has no value"
        return MetricVerdict(
            **base, verdict="not comparable", sentence=f"{figure.name}: not comparable ({why})"
        )
    alpha = 1.0 - level
    different = p_adj < alpha and abs(est.change) >= min_effect
    b_better = est.change < 0 if figure.better == "lower" else est.change > 0
    verdict: Verdict = (
        ("faster" if b_better else "slower") if different else "no detectable difference"
    )
    interval = f"{level:.0%} CI {est.ci_low * 100:+.1f}% to {est.ci_high * 100:+.1f}%"
    if different:
        sentence = f"{figure.name}: B is {verdict} ({est.change * 100:+.1f}%, {interval})"
    else:
        sentence = f"{figure.name}: no detectable difference ({est.change * 100:+.1f}%, {interval}"
        if est.ci_low > 0 or est.ci_high < 0:
            if abs(est.change) < min_effect:
                sentence += f"; below the {min_effect:.1%} smallest effect asked for"
            else:
                sentence += f"; not significant once corrected for {family} metrics"
        sentence += ")"
    return MetricVerdict(
        **base,
        change=est.change,
        ci_low=est.ci_low,
        ci_high=est.ci_high,
        p_value=est.p_value,
        p_adjusted=p_adj,
        verdict=verdict,
        sentence=sentence,
    )


def _warnings(order: str, interleaved: bool, n_a: int, n_b: int) -> list[str]:
    out = []
    if n_a != n_b:
        out.append(f"A has {n_a} runs and B {n_b}: runs are paired only when both sides have one")
    if not interleaved:
        out.append(
            f"the runs were not interleaved (order {order}): a drift of the machine between "
            "them is confounded with the difference between A and B; `sleuth bench ab` "
            "interleaves them"
        )
    elif len(order) >= 4 and all(order[i] == order[0] for i in range(0, len(order), 2)):
        out.append(
            f"every pair ran {order[0]} first (order {order}): an advantage of running second "
            "(a warmer cache) counts for the other side; ABBA order balances it"
        )
    return out


def _summary(verdicts: list[MetricVerdict], level: float, interleaved: bool) -> str:
    parts = []
    for kind in ("faster", "slower"):
        names = [f"{m.metric.upper()} {m.stat}".strip() for m in verdicts if m.verdict == kind]
        if names:
            parts.append(f"B is {kind} in {', '.join(names)}")
    steady = sum(m.verdict == "no detectable difference" for m in verdicts)
    if steady:
        parts.append(f"no detectable difference in {steady} metrics at {level:.0%}")
    text = "; ".join(parts) or "nothing could be compared"
    if not interleaved:
        text = "NOT INTERLEAVED, drift confounded: " + text
    return text + "."
