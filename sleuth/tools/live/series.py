"""Which series answer which question, for each engine, across the versions operators run.

Each figure lists candidate series newest first; the first one a page carries is used and
named in the figure. vLLM renamed `gpu_cache_usage_perc` to `kv_cache_usage_perc` (0.10),
`gpu_prefix_cache_*` to `prefix_cache_*`, and its V1 spec-decode counters added
`num_drafts` (needed for the mean acceptance length); SGLang publishes its acceptance as
gauges of the last log interval, and its retractions as a gauge, then also a counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["rate", "ratio", "accept_length", "gauge", "increase"]


@dataclass(frozen=True)
class Spec:
    name: str
    kind: Kind
    unit: str
    series: tuple[str, ...]
    """Candidates, newest first (for a ratio: numerators)."""
    per: tuple[str, ...] = ()
    """For a ratio or accept_length: the denominators, paired with `series` one to one."""
    combine: Literal["sum", "max"] = "sum"
    """Across label sets: add (requests of each DP rank) or take the highest (usage)."""


VLLM: tuple[Spec, ...] = (
    Spec(
        "request_rate",
        "rate",
        "req/s",
        ("vllm:request_success_total", "vllm:e2e_request_latency_seconds_count"),
    ),
    Spec("prompt_tokens_per_s", "rate", "tok/s", ("vllm:prompt_tokens_total",)),
    Spec("generation_tokens_per_s", "rate", "tok/s", ("vllm:generation_tokens_total",)),
    Spec(
        "spec_acceptance_rate",
        "ratio",
        "accepted/drafted",
        ("vllm:spec_decode_num_accepted_tokens_total",),
        ("vllm:spec_decode_num_draft_tokens_total",),
    ),
    Spec(
        "spec_mean_accept_length",
        "accept_length",
        "tokens/step",
        ("vllm:spec_decode_num_accepted_tokens_total",),
        ("vllm:spec_decode_num_drafts_total",),
    ),
    Spec(
        "prefix_cache_hit_rate",
        "ratio",
        "hits/queries",
        ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    ),
    Spec(
        "prefix_cache_hit_rate",
        "gauge",
        "fraction",
        ("vllm:gpu_prefix_cache_hit_rate",),
        combine="max",
    ),
    Spec(
        "kv_usage",
        "gauge",
        "fraction",
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        combine="max",
    ),
    Spec("running", "gauge", "requests", ("vllm:num_requests_running",)),
    Spec("waiting", "gauge", "requests", ("vllm:num_requests_waiting",)),
    Spec("preemptions", "increase", "preemptions", ("vllm:num_preemptions_total",)),
)

SGLANG: tuple[Spec, ...] = (
    Spec(
        "request_rate",
        "rate",
        "req/s",
        ("sglang:num_requests_total", "sglang:e2e_request_latency_seconds_count"),
    ),
    Spec("prompt_tokens_per_s", "rate", "tok/s", ("sglang:prompt_tokens_total",)),
    Spec("generation_tokens_per_s", "rate", "tok/s", ("sglang:generation_tokens_total",)),
    Spec(
        "spec_acceptance_rate",
        "gauge",
        "accepted/drafted",
        ("sglang:spec_accept_rate",),
        combine="max",
    ),
    Spec(
        "spec_mean_accept_length",
        "gauge",
        "tokens/step",
        ("sglang:spec_accept_length",),
        combine="max",
    ),
    Spec("prefix_cache_hit_rate", "gauge", "fraction", ("sglang:cache_hit_rate",), combine="max"),
    Spec("kv_usage", "gauge", "fraction", ("sglang:token_usage",), combine="max"),
    Spec("running", "gauge", "requests", ("sglang:num_running_reqs",)),
    Spec("waiting", "gauge", "requests", ("sglang:num_queue_reqs",)),
    Spec("preemptions", "increase", "retractions", ("sglang:num_retracted_requests_total",)),
    Spec(
        "preemptions", "gauge", "retracted requests", ("sglang:num_retracted_reqs",), combine="max"
    ),
)

SPECS = {"vllm": VLLM, "sglang": SGLANG}


def gauge_prefixes(engine: str | None) -> list[str]:
    """The gauge series to keep from the samples between a window's ends."""
    specs = SPECS.get(engine or "", VLLM + SGLANG)
    return sorted({name for s in specs if s.kind == "gauge" for name in s.series})
