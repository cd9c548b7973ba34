"""What a failure of a running server states about itself, read from the log around it.

Each reader returns the numbers a runtime failure's fix is written from, by name, as logged:
which ranks an NCCL collective timed out on, with which operation and after how long
(torch's ProcessGroupNCCL watchdog); how many requests were retracted (SGLang) or preempted
(vLLM V0) for lack of KV cache, how fast, and the token usage that led there; the last batch
line before a scheduler stopped making progress and how long before the failure it was
written; the cause a CUDA-graph capture failure hides (NCCL, custom all-reduce, out of
memory); the kernel or backend named just before an illegal memory access.
"""

from __future__ import annotations

import re

from sleuth.tools.serving.diagnose_lines import Line, frames
from sleuth.tools.serving.diagnose_phase import BATCH, seconds_between

# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout.
_NCCL_TIMEOUT = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+).*?Timeout\(ms\)=(?P<timeout>\d+)\) "
    r"ran for (?P<ran>\d+) milliseconds"
)
# sglang/srt/managers/scheduler.py (update_running_batch) and vllm/core/scheduler.py (_preempt).
_RETRACT = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+)")
_PREEMPT = re.compile(
    r"is preempted by (?:PreemptionMode\.)?(\w+) mode because there is not enough KV cache"
    r".*?total_num_cumulative_preemption=(\d+)"
)
STORM_EVENTS = 3
"""Retractions or preemption warnings in one log that make a storm rather than a blip."""
VLLM_LOGS_EVERY = 50
"""vLLM warns on every 50th preemption only, so a cumulative count of 50 or more is a storm
whatever the number of warnings shown."""


def is_storm(numbers: dict[str, str]) -> bool:
    return (
        int(numbers.get("events", "0")) >= STORM_EVENTS
        or int(numbers.get("preemptions", "0")) >= VLLM_LOGS_EVERY
    )


_USAGE = re.compile(r"(?:\bfull )?token usage: ([\d.]+)|GPU KV cache usage: ([\d.]+)%")
_RUNNING = re.compile(r"#running-req: (\d+)|Running: (\d+) reqs")
_INNER: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("out of memory", re.compile(r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError")),
    (
        "custom all-reduce",
        re.compile(r"custom_all_reduce|_C_custom_ar|CustomAllreduce|custom_ar\b"),
    ),
    ("NCCL", re.compile(r"NCCL WARN|nccl\w*Error|NCCL error|pynccl")),
)
_KERNEL_ASSERT = re.compile(
    r"(?P<file>[\w/.\-]+\.(?:cu|cuh|h)):\d+: (?P<kernel>\w+): block: .*Assertion "
    r"`(?P<check>[^`]*)`"
)
_BORING = re.compile(
    r"torch/(?:nn/modules|utils/_contextlib|_ops\.py|_dynamo)|/threading\.py|contextlib\.py"
)


def nccl_timeout(parsed: list[Line]) -> dict[str, str]:
    """Ranks, operation, sequence number and times of the collectives that timed out."""
    # A pasted line is often hard-wrapped: each line is read together with the next.
    joined = [
        a.msg + b.msg for a, b in zip(parsed, [*parsed[1:], Line(-1, "", "", "")], strict=True)
    ]
    found = [m for m in (_NCCL_TIMEOUT.search(text) for text in joined) if m]
    if not found:
        return {}
    ranks = sorted({int(m["rank"]) for m in found})
    first = found[0]
    return {
        "ranks": ", ".join(str(r) for r in ranks),
        "operation": first["op"],
        "seq": first["seq"],
        "timeout_ms": first["timeout"],
        "ran_ms": max((m["ran"] for m in found), key=int),
    }


def kv_pressure(parsed: list[Line]) -> dict[str, str]:
    """How often requests were retracted or preempted for KV cache, how fast, and the
    highest token usage and running-request count logged before the first time."""
    events = [line for line in parsed if _RETRACT.search(line.msg) or _PREEMPT.search(line.msg)]
    if not events:
        return {}
    out: dict[str, str] = {"events": str(len(events))}
    retracted = [int(m.group(1)) for m in (_RETRACT.search(e.msg) for e in events) if m]
    if retracted:
        out["retracted_reqs"] = str(sum(retracted))
    preempted = [m for m in (_PREEMPT.search(e.msg) for e in events) if m]
    if preempted:
        out["preemptions"] = max((m.group(2) for m in preempted), key=int)
        out["preemption_mode"] = preempted[-1].group(1)
    span = seconds_between(events[0], events[-1])
    if span and span > 0 and len(events) > 1:
        out["per_minute"] = f"{(len(events) - 1) * 60 / span:.1f}"
        out["over_seconds"] = f"{span:.0f}"
    before = [line for line in parsed if line.index <= events[0].index]
    usage = [_first(m) for m in (_USAGE.search(line.msg) for line in before) if m]
    if usage:
        out["token_usage"] = max(usage, key=float)
    running = [_first(m) for m in (_RUNNING.search(line.msg) for line in before) if m]
    if running:
        out["running_reqs"] = max(running, key=int)
    return out


def progress(parsed: list[Line], hit: Line) -> dict[str, str]:
    """The last batch line before the hit, and how long before it that line was written."""
    batches = [line for line in parsed if line.index < hit.index and BATCH.search(line.msg)]
    if not batches:
        return {}
    last = batches[-1]
    out = {"last_batch": last.msg[:300]}
    gap = seconds_between(last, hit)
    if gap is not None and gap >= 0:
        out["seconds_since_batch"] = f"{gap:.0f}"
    return out


def inner_cause(window: list[Line]) -> str | None:
    """The failure a CUDA-graph capture error wraps, from the lines around it."""
    text = "\n".join(line.msg for line in window)
    return next((name for name, pattern in _INNER if pattern.search(text)), None)


def fault_site(window: list[Line], hit: Line) -> dict[str, str]:
    """The kernel a device-side assertion names, else the last frame of the traceback above
    the error that is not torch's own plumbing (the op or backend that was running)."""
    for line in window:
        found = _KERNEL_ASSERT.search(line.msg)
        if found:
            return {
                "kernel": found["kernel"],
                "kernel_file": found["file"],
                "assertion": found["check"],
                "site_stated": "yes",
            }
    above = [line for line in window if line.index < hit.index]
    for path, func in reversed(frames(above)):
        if not _BORING.search(path):
            return {"frame": f"{'/'.join(path.split('/')[-2:])}:{func}"}
    return {}


def _first(found: re.Match[str]) -> str:
    return next(g for g in found.groups() if g is not None)
