"""Goodput under latency SLOs: which share of requests meets them, and the highest request
rate at which a target share still does, found by a bounded search over rates.

```python
slo = parse_slo("ttft=500ms,tpot=50ms")      # Slo(ttft_ms=500, tpot_ms=50)
found = search(probe, low=1, high=64, target=0.9, max_steps=6, budget_s=600)
found.max_rate, found.bracket               # e.g. 11.5, [11.5, 13.0]
```
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind, ToolError
from sleuth.tools.bench.models import PhaseMetrics, Slo

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "": 1.0}
SLO_PART = re.compile(r"^\s*(ttft|tpot|e2e)\s*=\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)?\s*$")


def parse_slo(text: str) -> Slo:
    """`ttft=500ms,tpot=50ms,e2e=2s` (a number alone is milliseconds) -> Slo."""
    limits: dict[str, float] = {}
    for part in text.split(","):
        match = SLO_PART.match(part.lower())
        if not match:
            raise ToolError(
                f"--slo {text!r}: give NAME=LIMIT pairs joined by commas, NAME one of ttft, "
                "tpot, e2e and LIMIT like 500ms or 2s",
                ErrorKind.INVALID_INPUT,
            )
        name, value, unit = match.groups()
        limits[f"{name}_ms"] = float(value) * UNITS_MS[unit or ""]
    return Slo(**limits)


class RateProbe(BaseModel):
    rate: float = Field(description="Requests/s offered.")
    achieved_rate: float = Field(description="Requests/s that completed.")
    share: float = Field(description="Share of the requests that met every SLO.")
    goodput: float = Field(description="Requests/s that met every SLO.")
    meets: bool = Field(description="The share reached the target.")
    requests: int
    elapsed_s: float
    jsonl: str


class GoodputSearch(BaseModel):
    slo: Slo
    target: float
    probes: list[RateProbe] = Field(description="Every rate tried, in the order tried.")
    max_rate: float | None = Field(
        description="The highest rate tried whose share reached the target; None if none did."
    )
    bracket: tuple[float, float | None] = Field(
        description="The answer lies between these rates; None above: the high rate still "
        "met the target."
    )
    stopped: str = Field(description="Why the search ended.")
    elapsed_s: float


Probe = Callable[[float], tuple[PhaseMetrics, str]]
"""Runs one load at a rate; returns its phase and where its records are."""


def search(
    probe: Probe,
    *,
    slo: Slo,
    low: float,
    high: float,
    target: float = 0.9,
    max_steps: int = 6,
    budget_s: float = 600.0,
    tolerance: float = 0.05,
) -> GoodputSearch:
    """Bisection between `low` and `high` for the highest rate whose share of requests
    meeting `slo` is at least `target`. It stops after `max_steps` probes, when the next
    probe would likely overrun `budget_s`, or when the bracket is narrower than
    `tolerance` of its top."""
    if not 0 < low < high:
        raise ToolError(f"give 0 < low < high, not {low:g}, {high:g}", ErrorKind.INVALID_INPUT)
    started = time.monotonic()
    probes: list[RateProbe] = []

    def run(rate: float) -> bool:
        t0 = time.monotonic()
        phase, jsonl = probe(rate)
        probes.append(_probe(rate, phase, jsonl, target, time.monotonic() - t0))
        return probes[-1].meets

    def done(**fields: Any) -> GoodputSearch:
        return GoodputSearch(
            slo=slo, target=target, probes=probes, elapsed_s=time.monotonic() - started, **fields
        )

    if not run(low):
        return done(max_rate=None, bracket=(0.0, low), stopped="the low rate already misses")
    if run(high):
        return done(
            max_rate=high,
            bracket=(high, None),
            stopped="the high rate still meets the target; search higher rates",
        )
    lo, hi = low, high
    stopped = f"bracket within {tolerance:.0%}"
    while (hi - lo) / hi > tolerance:
        if len(probes) >= max_steps:
            stopped = f"{max_steps} probes made (max_steps)"
            break
        last = probes[-1].elapsed_s
        if time.monotonic() - started + last > budget_s:
            stopped = f"another probe would pass the {budget_s:g} s time budget"
            break
        mid = (lo + hi) / 2.0
        if run(mid):
            lo = mid
        else:
            hi = mid
    return done(max_rate=lo, bracket=(lo, hi), stopped=stopped)


def _probe(rate: float, phase: PhaseMetrics, jsonl: str, target: float, took: float) -> RateProbe:
    share = phase.goodput_share if phase.goodput_share is not None else 0.0
    return RateProbe(
        rate=rate,
        achieved_rate=phase.request_throughput,
        share=share,
        goodput=phase.goodput or 0.0,
        meets=share >= target,
        requests=phase.requests,
        elapsed_s=took,
        jsonl=jsonl,
    )


def render_search(found: GoodputSearch) -> str:
    """The search as lines: the answer, then each probe."""
    limits = ", ".join(
        f"{name} <= {value:g} ms"
        for name, value in (
            ("TTFT", found.slo.ttft_ms),
            ("TPOT", found.slo.tpot_ms),
            ("E2E", found.slo.e2e_ms),
        )
        if value is not None
    )
    lo, hi = found.bracket
    top = "and above" if hi is None else f"to {hi:g} req/s"
    answer = (
        "no rate tried met it"
        if found.max_rate is None
        else f"max rate meeting it: {found.max_rate:g} req/s (bracket {lo:g} {top})"
    )
    lines = [f"SLO {limits}, target {found.target:.0%} of requests: {answer}"]
    lines.append(f"stopped: {found.stopped}; {len(found.probes)} probes, {found.elapsed_s:.0f} s")
    lines += [
        f"  {p.rate:8.3f} req/s: {p.share:6.1%} met, goodput {p.goodput:.2f} req/s, "
        f"achieved {p.achieved_rate:.2f} req/s {'OK' if p.meets else 'MISS'}"
        for p in found.probes
    ]
    return "\n".join(lines)
