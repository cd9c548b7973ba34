"""Named questions as PromQL, for each engine and the metric names its versions use.

A recipe's placeholders ({h}, {a}, {b}) each have candidate series, newest first; the one
Prometheus holds is chosen by asking it (`count by (__name__)`), so the PromQL shown is the
PromQL that ran and a person can paste it into Grafana.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Question = Literal[
    "request_rate",
    "generation_throughput",
    "prompt_throughput",
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "itl_p50",
    "itl_p99",
    "e2e_p99",
    "acceptance_rate",
    "acceptance_length",
    "kv_usage_peak",
    "waiting_peak",
    "preemptions",
]
Engine = Literal["vllm", "sglang"]
LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Recipe:
    template: str
    """PromQL with {by} (`by (...)` words), {sel} (label matchers), {w} (window) and one
    placeholder per series."""
    unit: str
    series: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _quantile(q: float, vllm: tuple[str, ...], sglang: tuple[str, ...]) -> dict[Engine, Recipe]:
    t = f"histogram_quantile({q:g}, sum by (le{{by_more}}) (rate({{h}}{{sel}}[{{w}}])))"
    return {"vllm": Recipe(t, "s", {"h": vllm}), "sglang": Recipe(t, "s", {"h": sglang})}


def _rate(vllm: tuple[str, ...], sglang: tuple[str, ...], unit: str) -> dict[Engine, Recipe]:
    t = "sum{by} (rate({c}{sel}[{w}]))"
    return {"vllm": Recipe(t, unit, {"c": vllm}), "sglang": Recipe(t, unit, {"c": sglang})}


def _peak(vllm: tuple[str, ...], sglang: tuple[str, ...], unit: str) -> dict[Engine, Recipe]:
    t = "max{by} (max_over_time({g}{sel}[{w}]))"
    return {"vllm": Recipe(t, unit, {"g": vllm}), "sglang": Recipe(t, unit, {"g": sglang})}


TTFT_V = ("vllm:time_to_first_token_seconds_bucket",)
TTFT_S = ("sglang:time_to_first_token_seconds_bucket",)
ITL_V = ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket")
ITL_S = (
    "sglang:inter_token_latency_seconds_bucket",
    "sglang:time_per_output_token_seconds_bucket",
)
TPOT_V = (
    "vllm:request_time_per_output_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_bucket",
)
TPOT_S = ("sglang:time_per_output_token_seconds_bucket",)
E2E_V = ("vllm:e2e_request_latency_seconds_bucket",)
E2E_S = ("sglang:e2e_request_latency_seconds_bucket",)
ACC_V = ("vllm:spec_decode_num_accepted_tokens_total",)

RECIPES: dict[Question, dict[Engine, Recipe]] = {
    "request_rate": _rate(
        ("vllm:request_success_total", "vllm:e2e_request_latency_seconds_count"),
        ("sglang:num_requests_total", "sglang:e2e_request_latency_seconds_count"),
        "req/s",
    ),
    "generation_throughput": _rate(
        ("vllm:generation_tokens_total",), ("sglang:generation_tokens_total",), "tok/s"
    ),
    "prompt_throughput": _rate(
        ("vllm:prompt_tokens_total",), ("sglang:prompt_tokens_total",), "tok/s"
    ),
    "ttft_p50": _quantile(0.5, TTFT_V, TTFT_S),
    "ttft_p99": _quantile(0.99, TTFT_V, TTFT_S),
    "tpot_p50": _quantile(0.5, TPOT_V, TPOT_S),
    "tpot_p99": _quantile(0.99, TPOT_V, TPOT_S),
    "itl_p50": _quantile(0.5, ITL_V, ITL_S),
    "itl_p99": _quantile(0.99, ITL_V, ITL_S),
    "e2e_p99": _quantile(0.99, E2E_V, E2E_S),
    "acceptance_rate": {
        "vllm": Recipe(
            "sum{by} (rate({a}{sel}[{w}])) / sum{by} (rate({b}{sel}[{w}]))",
            "accepted/drafted",
            {"a": ACC_V, "b": ("vllm:spec_decode_num_draft_tokens_total",)},
        ),
        "sglang": Recipe(
            "avg{by} (avg_over_time({g}{sel}[{w}]))",
            "accepted/drafted",
            {"g": ("sglang:spec_accept_rate",)},
        ),
    },
    "acceptance_length": {
        "vllm": Recipe(
            "1 + sum{by} (rate({a}{sel}[{w}])) / sum{by} (rate({b}{sel}[{w}]))",
            "tokens/step",
            {"a": ACC_V, "b": ("vllm:spec_decode_num_drafts_total",)},
        ),
        "sglang": Recipe(
            "avg{by} (avg_over_time({g}{sel}[{w}]))",
            "tokens/step",
            {"g": ("sglang:spec_accept_length",)},
        ),
    },
    "kv_usage_peak": _peak(
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        ("sglang:token_usage",),
        "fraction",
    ),
    "waiting_peak": _peak(("vllm:num_requests_waiting",), ("sglang:num_queue_reqs",), "requests"),
    "preemptions": {
        "vllm": Recipe(
            "sum{by} (increase({c}{sel}[{w}]))",
            "preemptions",
            {"c": ("vllm:num_preemptions_total",)},
        ),
        "sglang": Recipe(
            "sum{by} (increase({c}{sel}[{w}]))",
            "retractions",
            {"c": ("sglang:num_retracted_requests_total",)},
        ),
    },
}
GENERATION = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")
DETECT = 'count by (__name__) ({__name__=~"' + "|".join(GENERATION) + '"})'


def selector(labels: dict[str, str]) -> str:
    for name in labels:
        if not LABEL_NAME.match(name):
            raise ValueError(f"{name!r} is not a Prometheus label name")
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(labels.items())
    )
    return "{" + inner + "}" if inner else ""


def candidates_query(recipe: Recipe) -> str:
    names = "|".join(re.escape(n) for options in recipe.series.values() for n in options)
    return f'count by (__name__) ({{__name__=~"{names}"}})'


def build(
    recipe: Recipe, present: set[str], by: list[str], labels: dict[str, str], window_s: int
) -> str | None:
    """The PromQL for `recipe` over the series Prometheus has, or None if one is missing."""
    chosen: dict[str, str] = {}
    for slot, options in recipe.series.items():
        name = next((n for n in options if n in present), None)
        if name is None:
            return None
        chosen[slot] = name
    words = ", ".join(by)
    return recipe.template.format(
        by=f" by ({words})" if by else "",
        by_more=f", {words}" if by else "",
        sel=selector(labels),
        w=f"{window_s}s",
        **chosen,
    )
