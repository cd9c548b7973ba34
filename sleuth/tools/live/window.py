"""Figures from /metrics samples: rates and gauge max/mean over a window, or one reading.

Counters are compared between the window's two ends (the host's clock times the two
fetches); gauges are read at every sample. A counter that went down means the engine
restarted inside the window: its figure is None and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.tools.live.models import Figure
from sleuth.tools.live.prom import Sample, first_rank, highest, names, total
from sleuth.tools.live.series import SPECS, Spec


@dataclass(frozen=True)
class Reading:
    at: float
    """The host's time when the page was read (seconds since the epoch)."""
    samples: list[Sample]


def _pick(candidates: Sequence[str], present: set[str]) -> str | None:
    return next((c for c in candidates if c in present), None)


def _series(spec: Spec, present: set[str]) -> tuple[str, str | None] | None:
    """The series a figure is read from: the first candidate present, or for a ratio the
    first numerator/denominator PAIR present, so one version's names are never mixed."""
    if not spec.per:
        top = _pick(spec.series, present)
        return None if top is None else (top, None)
    pairs = zip(spec.series, spec.per, strict=True)
    return next(((a, b) for a, b in pairs if a in present and b in present), None)


def _combine(spec: Spec, samples: list[Sample], name: str) -> float | None:
    ranked = first_rank(samples)
    return highest(ranked, name) if spec.combine == "max" else total(ranked, name)


def window_figures(engine: str, readings: list[Reading]) -> list[Figure]:
    """Rates between the first and last reading; gauges over all of them."""
    first, last = readings[0], readings[-1]
    seconds = last.at - first.at
    present = names(first.samples) & names(last.samples)
    done: set[str] = set()
    out: list[Figure] = []
    for spec in SPECS[engine]:
        if spec.name in done:
            continue
        made = (
            _gauge(spec, readings)
            if spec.kind == "gauge"
            else _counter(spec, first.samples, last.samples, present, seconds)
        )
        if made:
            out += made
            done.add(spec.name)
    return out


def _counter(
    spec: Spec, start: list[Sample], end: list[Sample], present: set[str], seconds: float
) -> list[Figure]:
    found = _series(spec, present)
    if found is None:
        return []
    top, bottom = found
    series = [top] + ([bottom] if bottom else [])
    rise = _delta(spec, start, end, top)
    value, how = _counter_value(spec, rise, start, end, bottom, seconds)
    if rise is None:
        how = f"{top} went down within the window: the engine restarted"
    return [Figure(name=spec.name, value=value, unit=spec.unit, series=series, how=how)]


def _counter_value(
    spec: Spec,
    rise: float | None,
    start: list[Sample],
    end: list[Sample],
    bottom: str | None,
    seconds: float,
) -> tuple[float | None, str]:
    """The figure a counter's rise over the window makes, and how it was made."""
    span = f"{seconds:.2f} s"
    if rise is None:
        return None, ""
    if spec.kind == "rate":
        return (rise / seconds if seconds > 0 else None), f"increase {rise:g} over {span}"
    if spec.kind == "increase":
        return rise, f"increase over {span}"
    under = _delta(spec, start, end, bottom or "")
    if not under:
        return None, f"{bottom} did not increase over {span} (none in the window)"
    if spec.kind == "accept_length":
        return 1.0 + rise / under, f"1 + {rise:g} accepted / {under:g} drafts over {span}"
    return rise / under, f"{rise:g} / {under:g} over {span}"


def _delta(spec: Spec, start: list[Sample], end: list[Sample], name: str) -> float | None:
    a, b = _combine(spec, start, name), _combine(spec, end, name)
    if a is None or b is None or b < a:
        return None
    return b - a


def _gauge(spec: Spec, readings: list[Reading]) -> list[Figure]:
    present = set().union(*(names(r.samples) for r in readings))
    name = _pick(spec.series, present)
    if name is None:
        return []
    values = [v for r in readings if (v := _combine(spec, r.samples, name)) is not None]
    if not values:
        return []
    n = f"{len(values)} samples"
    return [
        Figure(
            name=f"{spec.name}_max",
            value=max(values),
            unit=spec.unit,
            series=[name],
            how=f"max of {n}",
        ),
        Figure(
            name=f"{spec.name}_mean",
            value=sum(values) / len(values),
            unit=spec.unit,
            series=[name],
            how=f"mean of {n}",
        ),
    ]


def now_figures(engine: str, samples: list[Sample]) -> list[Figure]:
    """One reading: gauges as they are now, counters as totals since the engine started."""
    present = names(samples)
    done: set[str] = set()
    out: list[Figure] = []
    for spec in SPECS[engine]:
        found = _series(spec, present)
        if spec.name in done or found is None:
            continue
        top, bottom = found
        done.add(spec.name)
        value = _combine(spec, samples, top)
        series = [top] + ([bottom] if bottom else [])
        if spec.kind == "gauge":
            out.append(
                Figure(name=spec.name, value=value, unit=spec.unit, series=series, how="now")
            )
            continue
        if spec.kind in ("rate", "increase"):
            out.append(
                Figure(
                    name=f"{spec.name.removesuffix('_per_s')}_since_launch",
                    value=value,
                    unit="total",
                    series=series,
                    how="counter total since the engine started, not a rate",
                )
            )
            continue
        under = _combine(spec, samples, bottom or "")
        ratio = None if not under or value is None else value / under
        if ratio is not None and spec.kind == "accept_length":
            ratio += 1.0
        out.append(
            Figure(
                name=f"{spec.name}_since_launch",
                value=ratio,
                unit=spec.unit,
                series=series,
                how="since the engine started (CUMULATIVE, not now)",
            )
        )
    return out
