"""Sleuth's KV predictions against what real engines printed at start-up (issue 26).

Each case of tests/fixtures/capacity_reports/cases.json is a published vLLM or SGLang start-up
(URL, version, GPU, settings, model config) with the figures the engine logged. The accounting
(accounting.py) predicts them from the recorded fields alone; the error is judged in tokens
where the KV pool is at least a fifth of the GPU's memory and in memory (as a share of the
GPU) where it is a sliver.
"""

from __future__ import annotations

from typing import Any

import pytest

from sleuth.tools.capacity.gpus import lookup
from tests.capacity_corpus import POOL_SHARE, Scored, load, predictable, score, summary

CASES = load()
SCORED = [score(c) for c in CASES if predictable(c)]
BIG = [s for s in SCORED if s.token_error is not None and s.pool_share >= POOL_SHARE]
SLIVER = [s for s in SCORED if s.token_error is not None and s.pool_share < POOL_SHARE]


def test_the_corpus_holds_thirty_cases_with_their_sources() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert case["url"].startswith("https://github.com/"), case["id"]
        assert case["engine"] in ("vllm", "sglang")
        assert "version" in case and case["gpu"]["count"] >= 1
        setup = case["setup"]
        assert setup["tp"] >= 1 and "kv_cache_dtype" in setup and "dtype" in setup
        fraction = setup.get("gpu_memory_utilization", setup.get("mem_fraction_static"))
        assert fraction is not None or any(k.endswith("_note") for k in setup), case["id"]
        assert case["reported"]["lines"], case["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_corpus_gpu_is_in_the_table(case: dict[str, Any]) -> None:
    spec = lookup(case["gpu"]["key"])
    assert spec is not None and spec.engine_memory_mib > 0


def test_kv_tokens_within_five_percent_median_and_ten_at_p90() -> None:
    median, p90 = summary([s.token_error or 0.0 for s in BIG])
    assert len(BIG) >= 25
    assert median <= 0.05, _table(BIG)
    assert p90 <= 0.10, _table(BIG)


def test_max_concurrency_within_five_percent_median_and_ten_at_p90() -> None:
    errors = [s.concurrency_error for s in BIG if s.concurrency_error is not None]
    median, p90 = summary(errors)
    assert len(errors) >= 20
    assert median <= 0.05 and p90 <= 0.10, _table(BIG)


def test_sliver_pools_are_off_by_under_two_percent_of_the_gpu_at_the_median() -> None:
    median, _ = summary([s.memory_error_share or 0.0 for s in SLIVER])
    assert SLIVER and median <= 0.02, _table(SLIVER)


def test_a_large_miss_names_the_term_that_is_uncertain() -> None:
    for s in SCORED:
        big_miss = s.token_error is not None and (
            abs(s.token_error) > 0.10
            if s.pool_share >= POOL_SHARE
            else (s.memory_error_share or 0.0) > 0.02
        )
        if big_miss:
            assert s.account.uncertain, (s.case["id"], s.token_error)


def test_predicted_lines_are_the_engines_own_wording() -> None:
    llama = next(s for s in SCORED if s.case["id"] == "llmd-llama31-8b-h100-tp1")
    reported = llama.case["reported"]["lines"]
    predicted = llama.account.lines
    assert predicted[1].startswith("GPU KV cache size: ")
    assert any("GPU KV cache size: 476,016 tokens" in line for line in reported)
    assert predicted[2].startswith("Maximum concurrency for 8,192 tokens per request: ")
    sglang = next(s for s in SCORED if s.case["engine"] == "sglang")
    assert sglang.account.lines[0].startswith("KV Cache is allocated. #tokens: ")


def _table(rows: list[Scored]) -> str:
    return "\n".join(
        f"{s.case['id']}: predicted {s.account.kv_tokens} reported {s.reported_tokens} "
        f"({(s.token_error or 0) * 100:+.1f} %)"
        for s in rows
    )
