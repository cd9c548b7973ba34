"""A window of log points summed up: each figure says which lines and which field it read.

Every SGLang rank logs its own lines; a line that several ranks logged in the same second
counts once, so a retraction logged by sixteen TP ranks is one retraction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sleuth.tools.live.log_lines import Kind, LogPoint
from sleuth.tools.live.models import Figure

LABELS: dict[Kind, str] = {
    "sglang_decode": "'Decode batch' lines",
    "sglang_prefill": "'Prefill batch' lines",
    "sglang_retract": "'Decode out of memory happened' (retraction) lines",
    "vllm_stats": "'Avg prompt throughput' lines",
    "vllm_spec": "'SpecDecoding metrics' lines",
    "vllm_preempt": "'is preempted' lines",
}
MEANS: dict[Kind, tuple[str, ...]] = {
    "sglang_decode": ("accept_length", "accept_rate", "gen_throughput", "kv_usage", "waiting"),
    "sglang_prefill": ("prompt_throughput", "kv_usage", "waiting"),
    "vllm_stats": (
        "gen_throughput",
        "prompt_throughput",
        "kv_usage",
        "prefix_cache_hit_rate",
        "waiting",
        "running",
    ),
    "vllm_spec": ("accept_length", "accept_rate"),
}
MAXES = ("kv_usage", "waiting", "running")
SUMS: dict[Kind, tuple[str, ...]] = {
    "sglang_prefill": ("new_tokens", "cached_tokens"),
    "sglang_retract": ("retracted",),
    "vllm_spec": ("accepted_tokens", "drafted_tokens"),
    "vllm_preempt": ("preempted",),
}


def in_window(points: list[LogPoint], last_s: float | None) -> list[LogPoint]:
    """The points of the last `last_s` seconds before the newest dated point (all without)."""
    if last_s is None:
        return points
    dated = [(p, _when(p.time)) for p in points]
    ends = [t for _, t in dated if t is not None]
    if not ends:
        return points
    start = max(ends).timestamp() - last_s
    return [p for p, t in dated if t is not None and t.timestamp() >= start]


def _when(time: str | None) -> datetime | None:
    if time is None:
        return None
    try:
        return datetime.fromisoformat(time if time[:4].isdigit() else f"2000-{time}")
    except ValueError:
        return None


def distinct(points: list[LogPoint]) -> list[LogPoint]:
    """One point per event: SGLang's ranks each log the same line in the same second, told
    apart only by the rank in the bracket."""
    seen: set[tuple[str | None, str]] = set()
    out: list[LogPoint] = []
    for p in points:
        key = (p.time, p.line.split("] ", 1)[-1] if p.rank else p.line)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def summary(points: list[LogPoint]) -> list[Figure]:
    counted = distinct(points)
    out: list[Figure] = []
    for kind, label in LABELS.items():
        mine = [p for p in counted if p.kind == kind]
        if not mine:
            continue
        span = _span(mine)
        out.append(
            Figure(
                name=f"{kind}_lines",
                value=len(mine),
                unit="lines",
                series=[f"log: {label}"],
                how=span,
            )
        )
        out += _fold(kind, mine, label, span, MEANS.get(kind, ()), "mean", _mean)
        out += _fold(kind, mine, label, span, MAXES, "max", max)
        out += _fold(kind, mine, label, span, SUMS.get(kind, ()), "sum", sum)
    return out


def _fold(
    kind: Kind,
    mine: list[LogPoint],
    label: str,
    span: str,
    fields: tuple[str, ...],
    how: str,
    fold: Callable[[list[float]], float],
) -> list[Figure]:
    out: list[Figure] = []
    for field in fields:
        values = [p.fields[field] for p in mine if field in p.fields]
        if values:
            out.append(
                Figure(
                    name=f"{kind}.{field}_{how}",
                    value=fold(values),
                    unit="",
                    series=[f"log: {field} of {label}"],
                    how=f"{how} of {len(values)} lines, {span}",
                )
            )
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _span(points: list[LogPoint]) -> str:
    times = [p.time for p in points if p.time]
    lines = f"lines {points[0].line_no}-{points[-1].line_no}"
    return f"{times[0]} to {times[-1]} ({lines})" if times else lines
