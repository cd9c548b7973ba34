"""capacity_plan's KV predictions against what real engines printed (issue 26).

`python -m benchmarks.capacity_accuracy` scores every case of
tests/fixtures/capacity_reports/cases.json, then the held-out set (heldout.json: engine
reports kept out while the accounting was built), with the accounting Sleuth uses
(accounting.py), and writes benchmarks/results/capacity_accuracy.md: per set, the median and
90th percentile over the cases whose KV pool is at least a fifth of the GPU (in tokens) and
over the slivers (in memory, as a share of the GPU), then the error per figure per case.
Offline, in milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import write_results
from tests.capacity_corpus import (
    CASES,
    HELD_OUT,
    POOL_SHARE,
    Scored,
    load,
    predictable,
    score,
    summary,
)

RESULTS = Path(__file__).parent / "results" / "capacity_accuracy.md"
REVEALED = {
    "llmd-llama31-8b-h100-tp1-qfp8": "online `--quantization fp8` on the bf16 checkpoint "
    "(capacity_plan's `quantization=fp8`: the decoder layers' linear weights at 1 B as they "
    "load), added after this held-out case showed the gap: KV tokens -10.06 % before the rule "
    "(476,000 predicted: the checkpoint's 14.96 GiB of bf16 weights sized, the engine loaded "
    "8.49 GiB)",
    "dennislee-qwen2-7b-a100-80gb-tp2-gmu05": "the tp > 1 non-torch term by collective library "
    "(0.12 GiB for NCCL without NVLink SHARP, where 1.85 GiB measured on H100 was charged) and "
    "A100 80GB's CUDA total (79.25 GiB, where 79.5 was estimated), both set after this case's "
    "-5.97 % had been seen: KV tokens -5.97 % before",
    "dennislee-qwen2-7b-a100-40gb-tp2-gmu05-2nodes": "the same tp > 1 rule, set after this "
    "case's -9.71 % had been seen: KV tokens -9.71 % before",
    "dennislee-qwen2-7b-a100-80gb-tp1-gmu05": "A100 80GB's CUDA total (79.25 GiB), which this "
    "run and its 0.25 twin confirm: KV tokens -0.55 % before",
    "cmontemuino-llama31-8b-mi300x-tp1-fp16-gmu09": "V0 from 0.8.0 leaves long-context chunked "
    "prefill off on ROCm (arg_utils.py: current_platform.is_cuda()), so the profile is one "
    "full-length prefill; read after this case and its corpus twin were scored: KV tokens "
    "+10.63 % before (the 2048-token chunk profiled)",
}
"""Held-out cases a rule was added for after they were scored: no longer blind tests."""


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.2f} %"


def _row(s: Scored) -> str:
    c, a = s.case, s.account
    share = "pool" if s.pool_share >= POOL_SHARE else "sliver"
    return (
        f"| {c['id']} | {c['engine']} {c.get('version') or c.get('vllm_generation', '')} "
        f"| {c['gpu']['count']}× {c['gpu']['key']} | {a.kv_tokens:,} | "
        f"{s.reported_tokens or 0:,} | {_pct(s.token_error)} | {_pct(s.concurrency_error)} | "
        f"{(s.memory_error_share or 0) * 100:.2f} % | {share} | {'; '.join(a.uncertain)} |"
    )


def _both(pair: tuple[float, float]) -> str:
    """'median | p90' cells; a set with no case says so instead of nan."""
    if pair[0] != pair[0]:
        return "no case | no case"
    return f"{pair[0] * 100:.2f} % | {pair[1] * 100:.2f} %"


def _figures(rated: list[Scored]) -> list[str]:
    """The summary table: KV tokens and max concurrency where the pool is at least a fifth
    of the GPU, KV memory (share of the GPU) where it is a sliver."""
    big = [s for s in rated if s.pool_share >= POOL_SHARE]
    sliver = [s for s in rated if s.pool_share < POOL_SHARE]
    tok = summary([s.token_error or 0.0 for s in big])
    conc = summary([s.concurrency_error for s in big if s.concurrency_error is not None])
    mem = summary([s.memory_error_share or 0.0 for s in sliver])
    v1 = summary([s.token_error or 0.0 for s in big if s.case.get("vllm_generation") == "v1"])
    n_v1 = sum(s.case.get("vllm_generation") == "v1" for s in big)
    return [
        "| set | cases | median | p90 | target |",
        "|---|---|---|---|---|",
        f"| KV tokens, pool ≥ 1/5 of the GPU | {len(big)} | {_both(tok)} | ≤ 5 % / ≤ 10 % |",
        f"| max concurrency, same cases | {sum(s.concurrency_error is not None for s in big)} "
        f"| {_both(conc)} | ≤ 5 % / ≤ 10 % |",
        f"| KV memory, sliver pools (share of GPU memory) | {len(sliver)} | {_both(mem)} | ≤ 2 % |",
        f"| KV tokens, vLLM V1 only, pool ≥ 1/5 | {n_v1} | {_both(v1)} | |",
    ]


def _off_h100(rated: list[Scored]) -> list[Scored]:
    return [s for s in rated if not s.case["gpu"]["key"].startswith("H100")]


def _non_h100(rated: list[Scored], held_out: bool = False) -> list[str]:
    """Issue 43's figures: the cases on GPUs other than H100, in KV tokens whatever the pool's
    share (the acceptance's measure), then pool ≥ 1/5 only, then by stated version (and on
    the held-out set, the cases still blind), then per GPU model."""
    off = _off_h100(rated)
    big = [s for s in off if s.pool_share >= POOL_SHARE]
    stated = [s for s in off if s.case.get("version")]
    gpus = sorted({s.case["gpu"]["key"] for s in off})
    per_gpu = [
        f"| {gpu} | {len(rows)} | {_both(summary([s.token_error or 0.0 for s in rows]))} |"
        for gpu in gpus
        for rows in [[s for s in off if s.case["gpu"]["key"] == gpu]]
    ]
    return [
        "| non-H100 set | cases | median | p90 | target |",
        "|---|---|---|---|---|",
        f"| KV tokens, every case | {len(off)} | "
        f"{_both(summary([s.token_error or 0.0 for s in off]))} | ≤ 5 % / ≤ 10 % |",
        f"| KV tokens, pool ≥ 1/5 of the GPU | {len(big)} | "
        f"{_both(summary([s.token_error or 0.0 for s in big]))} | |",
        f"| KV tokens, engine version stated by the source | {len(stated)} | "
        f"{_both(summary([s.token_error or 0.0 for s in stated]))} | ≤ 5 % / ≤ 10 % |",
        *(_blind_row(off) if held_out else []),
        "",
        "| GPU | cases | median | p90 |",
        "|---|---|---|---|",
        *per_gpu,
    ]


def _blind_row(off: list[Scored]) -> list[str]:
    blind = [s for s in off if s.case["id"] not in REVEALED]
    return [
        f"| KV tokens, still blind (no rule added after they were scored) | {len(blind)} | "
        f"{_both(summary([s.token_error or 0.0 for s in blind]))} | |"
    ]


def _cases_table(rated: list[Scored]) -> list[str]:
    return [
        "| case | engine | GPUs | predicted tokens | reported | tokens error | concurrency "
        "error | memory error / GPU | pool | uncertain terms |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_row(s) for s in rated),
    ]


def _rated(cases: list[dict[str, Any]]) -> list[Scored]:
    return [s for s in (score(c) for c in cases if predictable(c)) if s.token_error is not None]


def report() -> str:
    cases, held = load(CASES), load(HELD_OUT)
    rated, held_rated = _rated(cases), _rated(held)
    blind = [s for s in held_rated if s.case["id"] not in REVEALED]
    return "\n".join(
        [
            "## capacity_plan accuracy against engine start-up logs (issue 26)",
            "",
            "Reproduce: `python -m benchmarks.capacity_accuracy`.",
            "",
            f"{len(cases)} published start-ups (tests/fixtures/capacity_reports/cases.json), "
            f"{len(rated)} predictable and rated; each predicted from the recorded settings and "
            "config.json fields alone.",
            "",
            *_figures(rated),
            "",
            "GPUs other than H100 (issue 43), KV tokens:",
            "",
            *_non_h100(rated),
            "",
            *_cases_table(rated),
            "",
            "### Held-out set",
            "",
            f"{len(held)} engine start-ups kept out while the accounting was built "
            f"(tests/fixtures/capacity_reports/heldout.json), {len(held_rated)} predictable and "
            f"rated the same way. Rules were added after {len(REVEALED)} of them were scored, "
            "for the gaps they showed, so those are no longer blind tests:",
            "",
            *(f"- {case}: {why}." for case, why in REVEALED.items()),
            "",
            *_figures(held_rated),
            "",
            f"The {len(blind)} cases still blind (no rule added for them):",
            "",
            *_figures(blind),
            "",
            "GPUs other than H100 (issue 43), KV tokens, held-out set:",
            "",
            *_non_h100(held_rated, held_out=True),
            "",
            *_cases_table(held_rated),
            "",
            "### Both sets together",
            "",
            "Issue 43's acceptance set: the corpus and the held-out start-ups, GPUs other than "
            "H100, KV tokens:",
            "",
            *_non_h100(rated + held_rated),
            "",
        ]
    )


def main() -> None:
    text = report()
    write_results(RESULTS, text)


if __name__ == "__main__":
    main()
