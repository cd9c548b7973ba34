"""A/B verdicts for two benchmark runs: is the difference real, or the machine's noise?

```python
report = compare(Path("a.jsonl"), Path("b.jsonl"), seed=0)
report.phases[0].metrics[0].sentence   # "B's TPOT p50 is 18.2% lower (95% CI 15.0% to 21.1%)"
```

Per phase (matched by order) and per metric, the statistic of B relative to A with a
percentile bootstrap interval over the per-request samples (each run resampled on its
own, seeded). A change is `significant` only when its interval excludes zero AND it is
at least `MIN_EFFECT` in size, so a busy machine's jitter of a percent or two is not
reported as a change. Both runs are read with the metrics module's one reader.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeGuard

from pydantic import BaseModel, Field

from sleuth.tools.bench.ab import ABAnalysis, Side, analyse, pairing
from sleuth.tools.bench.metrics import (
    client_health,
    gaps,
    parse_lines,
    percentile,
    summarise,
    tpot,
)
from sleuth.tools.bench.models import BenchReport, ClientLimits, RequestRecord

SCHEMA_VERSION = 1
MIN_EFFECT = 0.03
"""Smallest relative difference called a change, whatever the interval says."""
CONFIDENCE = 0.95
NOT_INTERLEAVED = (
    "A and B each ran once, one after the other: not interleaved, so any drift of the "
    "machine between the two runs is inside every difference below; `sleuth bench ab` "
    "runs them in turns, or give several runs of each side that took turns"
)
VOLATILE = frozenset({"type", "epoch_at_zero", "pid", "python", "aiohttp", "uvloop", "json"})
"""Header fields that differ between any two runs and say nothing about the workload."""

Stat = Literal["p50", "p90", "p99", "mean"]
METRICS: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": lambda r: None if r.t_first is None else (r.t_first - r.t_send) * 1000,
    "tpot": lambda r: None if (t := tpot(r)) is None else t * 1000,
    "itl": lambda r: _mean_itl(r),
    "e2e": lambda r: ((r.t_last_token or r.t_done) - r.t_send) * 1000,
}
UNITS = {"ttft": "ms", "tpot": "ms", "itl": "ms", "e2e": "ms"}


class MetricDiff(BaseModel):
    metric: str
    stat: Stat
    unit: str
    a: float | None
    b: float | None
    n_a: int
    n_b: int
    rel_diff: float | None
    """(B - A) / A of the statistic; negative means B is lower."""
    ci_low: float | None
    ci_high: float | None
    significant: bool
    sentence: str


class PhaseDiff(BaseModel):
    phase: int
    load_a: str
    load_b: str
    metrics: list[MetricDiff]


class CompareReport(BaseModel):
    schema_version: int = SCHEMA_VERSION
    a: str
    b: str
    seed: int
    resamples: int
    confidence: float = CONFIDENCE
    min_effect: float = MIN_EFFECT
    phases: list[PhaseDiff]
    settings_differ: dict[str, list[object]] = Field(default_factory=dict)
    """Header settings that differ between the runs (beyond the named factor): [A, B]."""
    warnings: list[str] = Field(default_factory=list)
    summary: str
    interleaved: bool = Field(
        False, description="The runs of A and B took turns; else drift is in every difference."
    )
    repeats: list[ABAnalysis] = Field(
        default_factory=list,
        description="With several runs per side: the verdicts over the paired runs, per phase.",
    )


class CompareError(Exception):
    """A run could not be compared; the message names the file and what is wrong."""


def compare(
    path_a: Path,
    path_b: Path,
    *,
    seed: int = 0,
    resamples: int = 1000,
    stats: Sequence[Stat] = ("p50", "p90"),
    factor: Sequence[str] = (),
) -> CompareReport:
    """Compare run B against run A, phase by phase and metric by metric."""
    header_a, phases_a, records_a = _read(path_a)
    header_b, phases_b, records_b = _read(path_b)
    rng = random.Random(seed)
    warnings: list[str] = []
    if len(phases_a) != len(phases_b):
        warnings.append(
            f"A has {len(phases_a)} phases and B {len(phases_b)}; only the first "
            f"{min(len(phases_a), len(phases_b))} are compared"
        )
    out: list[PhaseDiff] = []
    for pa, pb in zip(phases_a, phases_b, strict=False):
        ra = _ok(records_a, pa["phase"])
        rb = _ok(records_b, pb["phase"])
        for name, recs, ph in (("A", ra, pa), ("B", rb, pb)):
            if len(recs) < 2:
                warnings.append(
                    f"phase {ph['phase']} of {name} has {len(recs)} successful requests; "
                    "no interval can be drawn from fewer than 2"
                )
        diffs = [
            _diff(metric, stat, ra, rb, rng, resamples) for metric in METRICS for stat in stats
        ]
        out.append(PhaseDiff(phase=pa["phase"], load_a=_load(pa), load_b=_load(pb), metrics=diffs))
        if _load(pa) != _load(pb):
            warnings.append(f"phase {pa['phase']}: A ran at {_load(pa)} and B at {_load(pb)}")
    differ = settings_diff(header_a, header_b, factor)
    if differ:
        warnings.append(
            "the runs' settings differ in more than the factor under test: "
            + ", ".join(f"{k} (A {v[0]!r}, B {v[1]!r})" for k, v in differ.items())
        )
    for name, phases in (("A", phases_a), ("B", phases_b)):
        if any(_client_limited(p) for p in phases):
            warnings.append(
                f"run {name} flagged itself client-limited: its figures understate the server"
            )
    warnings.append(NOT_INTERLEAVED)
    return CompareReport(
        a=str(path_a),
        b=str(path_b),
        seed=seed,
        resamples=resamples,
        phases=out,
        settings_differ=differ,
        warnings=warnings,
        summary=_summary(out),
    )


def compare_repeats(
    paths_a: Sequence[Path],
    paths_b: Sequence[Path],
    *,
    level: float = CONFIDENCE,
    min_effect: float = 0.0,
) -> CompareReport:
    """Several stored runs per side: the runs are paired in the order they ran and judged
    like `ab_benchmark`'s (a paired t-interval over the pairs), phase by phase; whether
    they took turns is read from their start times and said plainly."""
    runs: list[tuple[Side, BenchReport, float]] = []
    sides: tuple[tuple[Side, Sequence[Path]], ...] = (("A", paths_a), ("B", paths_b))
    for side, paths in sides:
        for path in paths:
            header, phases, _ = _read(path)
            zero, offset = header.get("epoch_at_zero"), phases[0].get("t_start")
            start = float(zero) if isinstance(zero, (int, float)) else 0.0
            start += float(offset) if isinstance(offset, (int, float)) else 0.0
            runs.append((side, summarise(_lines(path)), start))
    order, interleaved, pairs = pairing([(side, start) for side, _, start in runs])
    analyses = []
    for k in range(min(len(report.phases) for _, report, _ in runs)):
        analyses.append(
            analyse(
                [runs[i][1].phases[k] for i, _ in pairs],
                [runs[j][1].phases[k] for _, j in pairs],
                order=order,
                interleaved=interleaved,
                level=level,
                min_effect=min_effect,
            )
        )
    warnings = sorted({w for a in analyses for w in a.warnings})
    return CompareReport(
        a=", ".join(map(str, paths_a)),
        b=", ".join(map(str, paths_b)),
        seed=0,
        resamples=0,
        confidence=level,
        min_effect=min_effect,
        phases=[],
        warnings=warnings,
        summary=" ".join(f"phase {k}: {a.summary}" for k, a in enumerate(analyses)),
        interleaved=interleaved,
        repeats=analyses,
    )


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def is_stat(name: str) -> TypeGuard[Stat]:
    return name in ("p50", "p90", "p99", "mean")


def settings_diff(
    a: dict[str, object], b: dict[str, object], factor: Sequence[str] = ()
) -> dict[str, list[object]]:
    keys = (set(a) | set(b)) - VOLATILE - set(factor)
    return {k: [a.get(k), b.get(k)] for k in sorted(keys) if a.get(k) != b.get(k)}


def bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float]], float],
    rng: random.Random,
    resamples: int,
) -> tuple[float, float] | None:
    """Percentile interval of statistic(B)/statistic(A) - 1, each run resampled on its own."""
    if len(a) < 2 or len(b) < 2:
        return None
    ratios = []
    for _ in range(resamples):
        sa = statistic(rng.choices(a, k=len(a)))
        sb = statistic(rng.choices(b, k=len(b)))
        if sa > 0:
            ratios.append(sb / sa - 1.0)
    if not ratios:
        return None
    ratios.sort()
    tail = (1.0 - CONFIDENCE) / 2 * 100
    return percentile(ratios, tail), percentile(ratios, 100 - tail)


def _read(path: Path) -> tuple[dict[str, object], list[dict[str, object]], list[RequestRecord]]:
    try:
        with path.open(encoding="utf-8") as fh:
            header, phases, records = parse_lines(fh)
    except OSError as exc:
        raise CompareError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CompareError(
            f"{path} is not a sleuth bench record (JSON lines from `sleuth bench`): {exc}"
        ) from exc
    if not header or not phases:
        raise CompareError(
            f"{path} holds no benchmark header or phase; give the .jsonl that `sleuth bench` "
            "wrote (its path is printed after the table)"
        )
    return header, phases, records


def _ok(records: list[RequestRecord], phase: object) -> list[RequestRecord]:
    return [r for r in records if r.phase == phase and not r.warmup and r.ok]


def _load(phase: dict[str, object]) -> str:
    if phase.get("mode") == "closed":
        return f"c={phase.get('concurrency')}"
    rate = phase.get("request_rate")
    return "replay" if rate is None else f"r={rate}"


def _client_limited(phase: dict[str, object]) -> bool:
    return client_health(dict(phase), ClientLimits()).client_limited


def _stat_fn(stat: Stat) -> Callable[[Sequence[float]], float]:
    if stat == "mean":
        return lambda xs: sum(xs) / len(xs)
    q = float(stat[1:])
    return lambda xs: percentile(sorted(xs), q)


def _diff(
    metric: str,
    stat: Stat,
    ra: list[RequestRecord],
    rb: list[RequestRecord],
    rng: random.Random,
    resamples: int,
) -> MetricDiff:
    get = METRICS[metric]
    xa = [v for r in ra if (v := get(r)) is not None]
    xb = [v for r in rb if (v := get(r)) is not None]
    fn = _stat_fn(stat)
    va = fn(xa) if xa else None
    vb = fn(xb) if xb else None
    rel = None if va is None or vb is None or va <= 0 else vb / va - 1.0
    ci = bootstrap_ci(xa, xb, fn, rng, resamples)
    lo, hi = ci if ci else (None, None)
    significant = (
        rel is not None
        and lo is not None
        and hi is not None
        and (lo > 0 or hi < 0)
        and abs(rel) >= MIN_EFFECT
    )
    return MetricDiff(
        metric=metric,
        stat=stat,
        unit=UNITS[metric],
        a=va,
        b=vb,
        n_a=len(xa),
        n_b=len(xb),
        rel_diff=rel,
        ci_low=lo,
        ci_high=hi,
        significant=significant,
        sentence=_sentence(metric, stat, rel, lo, hi, significant),
    )


def _pct(x: float) -> str:
    return f"{abs(x) * 100:.1f}%"


def _sentence(
    metric: str,
    stat: str,
    rel: float | None,
    lo: float | None,
    hi: float | None,
    significant: bool,
) -> str:
    name = f"{metric.upper()} {stat}"
    if rel is None:
        return f"{name}: not comparable (no successful requests on one side)"
    if lo is None or hi is None:
        return f"{name}: B is {rel * 100:+.1f}% against A, too few requests for an interval"
    interval = f"95% CI {lo * 100:+.1f}% to {hi * 100:+.1f}%"
    if significant:
        direction = "lower" if rel < 0 else "higher"
        return f"B's {name} is {_pct(rel)} {direction} ({interval})"
    return f"{name} unchanged within noise ({rel * 100:+.1f}%, {interval})"


def _summary(phases: list[PhaseDiff]) -> str:
    parts = []
    for phase in phases:
        changed = [m.sentence for m in phase.metrics if m.significant]
        steady = sorted(
            {m.metric.upper() for m in phase.metrics}
            - {m.metric.upper() for m in phase.metrics if m.significant}
        )
        text = "; ".join(changed) if changed else "no significant difference"
        if changed and steady:
            text += f"; {', '.join(steady)} unchanged within noise"
        parts.append(f"phase {phase.phase} ({phase.load_a}): {text}")
    return ". ".join(parts) + "." if parts else "nothing to compare."


def _mean_itl(r: RequestRecord) -> float | None:
    pairs = gaps(r)
    if not pairs:
        return None
    return sum(g / n for g, n in pairs) / len(pairs) * 1000
