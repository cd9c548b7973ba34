"""Engines' periodic statistics lines as data points: SGLang's prefill and decode batch lines
and retraction warnings, vLLM's throughput/KV lines (V0 and V1), `SpecDecoding metrics` lines
and preemption warnings. One reader for these line formats; fields keep the engine's meaning,
named once here.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

Kind = Literal[
    "sglang_decode", "sglang_prefill", "sglang_retract", "vllm_stats", "vllm_spec", "vllm_preempt"
]

KINDS: list[tuple[Kind, re.Pattern[str]]] = [
    ("sglang_decode", re.compile(r"\bDecode batch[.,] ")),
    ("sglang_prefill", re.compile(r"\bPrefill batch[.,] ")),
    ("sglang_retract", re.compile(r"\bDecode out of memory happened\. ")),
    ("vllm_spec", re.compile(r"\bSpecDecoding metrics: ")),
    ("vllm_stats", re.compile(r"\bAvg prompt throughput: ")),
    ("vllm_preempt", re.compile(r"\bis preempted by PreemptionMode\.")),
]
# `key: number` pairs; the key runs back to the previous comma or the line's marker.
PAIR = re.compile(
    r"(?:^|, |\] |: |\. )([#A-Za-z][^:,.\]]*?): (-?[0-9][0-9.]*(?:e[+-]?[0-9]+)?)(%?)"
)
CUMULATIVE_PREEMPTIONS = re.compile(r"total_num_cumulative_preemption=([0-9]+)")

FIELDS: dict[str, str] = {
    "#running-req": "running",
    "Running": "running",
    "#queue-req": "waiting",
    "Waiting": "waiting",
    "Pending": "waiting",
    "token usage": "kv_usage",
    "#token": "tokens",
    "accept len": "accept_length",
    "Mean acceptance length": "accept_length",
    "accept rate": "accept_rate",
    "Draft acceptance rate": "accept_rate",
    "gen throughput (token/s)": "gen_throughput",
    "Avg generation throughput": "gen_throughput",
    "input throughput (token/s)": "prompt_throughput",
    "Avg prompt throughput": "prompt_throughput",
    "#new-seq": "new_seqs",
    "#new-token": "new_tokens",
    "#cached-token": "cached_tokens",
    "Prefix cache hit rate": "prefix_cache_hit_rate",
    "#retracted_reqs": "retracted",
    "Accepted": "accepted_tokens",
    "Drafted": "drafted_tokens",
    "Swapped": "swapped",
}
"""The engines' words for each field, mapped to one name (percentages become fractions)."""

SGLANG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
RANK = re.compile(r"^\[[^\]]*? ((?:TP|DP|PP|EP)[0-9]+(?: (?:TP|DP|PP|EP)[0-9]+)*)\]")
VLLM_TIME = re.compile(r"\b(?:INFO|WARNING|DEBUG|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)\b")


class LogPoint(BaseModel):
    line_no: int
    """1-based, in the text read."""
    kind: Kind
    time: str | None
    """As logged, ISO-8601 (vLLM logs no year: its points carry month-day time only)."""
    fields: dict[str, float]
    rank: str | None = None
    """SGLang's scheduler rank (`TP0`, `TP13`, `TP0 EP0`): every rank logs its own line."""
    line: str


MARKER = re.compile("|".join(pattern.pattern for _, pattern in KINDS))
"""Any kind's marker: one scan rules out the lines that are none (most of a busy log)."""


def point(line_no: int, line: str) -> LogPoint | None:
    if not MARKER.search(line):
        return None
    kind = next((k for k, pattern in KINDS if pattern.search(line)), None)
    if kind is None:
        return None
    fields: dict[str, float] = {}
    for key, number, percent in PAIR.findall(line):
        # vLLM V1 names the KV cache by its device (GPU, CPU, XPU); V0's line names GPU
        # first, then its CPU swap space, which the first-seen rule leaves out.
        name = "kv_usage" if key.endswith("KV cache usage") else FIELDS.get(key.strip())
        if name is not None and name not in fields:
            fields[name] = float(number) / (100.0 if percent else 1.0)
    if kind == "vllm_preempt":
        fields["preempted"] = 1.0
        total = CUMULATIVE_PREEMPTIONS.search(line)
        if total:
            fields["preemptions_total"] = float(total.group(1))
    rank = RANK.search(line)
    return LogPoint(
        line_no=line_no,
        kind=kind,
        time=_time(line),
        fields=fields,
        rank=rank.group(1) if rank else None,
        line=line,
    )


def _time(line: str) -> str | None:
    found = SGLANG_TIME.search(line)
    if found:  # already ISO-8601 but for the separator: no parsing (strptime is slow)
        return found.group(1).replace(" ", "T")
    found = VLLM_TIME.search(line)
    return found.group(1).replace(" ", "T") if found else None


def points(lines: list[str]) -> list[LogPoint]:
    return [p for n, line in enumerate(lines, 1) if (p := point(n, line)) is not None]
