"""Small-sample statistics for A/B verdicts, in pure Python (no scipy): Student's t, a paired
interval on log ratios, and Holm's step-down correction.

```python
est = paired_log_ratio([20.0, 20.1, 19.9], [20.6, 20.7, 20.5], level=0.95)
est.change, est.ci_low, est.ci_high   # B/A - 1 and its interval, e.g. 0.030, 0.026, 0.034
holm([0.001, 0.04, 0.3])              # [0.003, 0.08, 0.3]
```
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

_TINY = 1e-300
_EPS = 3e-16


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


@cache
def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t (0.5 < q < 1), e.g. t_quantile(0.975, 4) = 2.776."""
    if not 0.5 < q < 1.0:
        raise ValueError(f"q must lie between 0.5 and 1, not {q}")
    tail = 2.0 * (1.0 - q)
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > tail:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class PairedEstimate:
    """B against A over n paired repeats: the relative change B/A - 1 (the geometric mean of
    the per-repeat ratios) with its t-interval, and the two-sided p-value of no change."""

    n: int
    change: float
    ci_low: float
    ci_high: float
    p_value: float
    log_sd: float


def paired_log_ratio(a: Sequence[float], b: Sequence[float], level: float) -> PairedEstimate | None:
    """The paired t-interval of mean(log(b_i / a_i)), returned as relative changes.

    None when fewer than two pairs have positive values on both sides (no spread, no
    interval). Identical ratios in every pair give a zero-width interval and p = 0 (or 1
    when there is no change at all).
    """
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True) if x > 0 and y > 0]
    n = len(logs)
    if n < 2:
        return None
    mean = sum(logs) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)
    if sd > 0.0:
        p = t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1)
    else:
        p = 1.0 if mean == 0.0 else 0.0
    return PairedEstimate(
        n=n,
        change=math.expm1(mean),
        ci_low=math.expm1(mean - half),
        ci_high=math.expm1(mean + half),
        p_value=p,
        log_sd=sd,
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: rejecting those below alpha
    keeps the chance of any false rejection in the family at most alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
