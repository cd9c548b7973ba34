"""Sleuth's KV predictions against what real engines printed at start-up (issue 26).

Each case of tests/fixtures/capacity_reports/cases.json is a published vLLM or SGLang start-up
(URL, version, GPU, settings, model config) with the figures the engine logged. The accounting
(accounting.py) predicts them from the recorded fields alone; the error is judged in tokens
where the KV pool is at least a fifth of the GPU's memory and in memory (as a share of the
GPU) where it is a sliver.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from sleuth.tools.capacity.gpus import lookup
from tests.capacity_corpus import HELD_OUT, POOL_SHARE, Scored, load, predictable, score, summary

CASES = load()
HELD = load(HELD_OUT)
SWEEP_COMMIT = "d3121e059da88662db39a926a3ead964be97359b"
SCORED = [score(c) for c in CASES if predictable(c)]
BIG = [s for s in SCORED if s.token_error is not None and s.pool_share >= POOL_SHARE]
SLIVER = [s for s in SCORED if s.token_error is not None and s.pool_share < POOL_SHARE]


def _sourced(case: dict[str, Any]) -> None:
    assert case["url"].startswith("https://github.com/"), case["id"]
    if case["source_kind"] == "committed_log":
        assert re.search(r"/blob/[0-9a-f]{40}/", case["url"]), case["id"]  # pinned to a commit
        if "llm-d-planner" in case["url"]:
            assert f"/blob/{SWEEP_COMMIT}/" in case["url"], case["id"]
    assert case["engine"] in ("vllm", "sglang")
    assert "version" in case and case["gpu"]["count"] >= 1
    setup = case["setup"]
    assert setup["tp"] >= 1 and "kv_cache_dtype" in setup and "dtype" in setup
    fraction = setup.get("gpu_memory_utilization", setup.get("mem_fraction_static"))
    assert fraction is not None or any(k.endswith("_note") for k in setup), case["id"]
    assert case["reported"]["lines"] and case["config_source"], case["id"]


def test_the_corpus_holds_thirty_cases_with_their_sources() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        _sourced(case)


def test_the_held_out_set_is_sourced_and_apart_from_the_corpus() -> None:
    assert HELD
    for case in HELD:
        _sourced(case)
    assert not {c["id"] for c in HELD} & {c["id"] for c in CASES}
    assert not {_run(c) for c in HELD} & {_run(c) for c in CASES}
    assert len({_run(c) for c in HELD}) == len(HELD)


def _run(case: dict[str, Any]) -> tuple[str, int | None]:
    """Where one start-up was published: its log's URL, and the cell when a notebook holds
    several runs."""
    return case["url"], case.get("cell")


@pytest.mark.parametrize("case", CASES + HELD, ids=[c["id"] for c in CASES + HELD])
def test_every_reported_figure_is_in_a_quoted_line(case: dict[str, Any]) -> None:
    reported = case["reported"]
    quoted = {
        float(n.replace(",", ""))
        for line in reported["lines"]
        for n in re.findall(r"\d[\d,]*(?:\.\d+)?", line)
    }
    for key, value in reported.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert float(value) in quoted, (case["id"], key, value)


@pytest.mark.parametrize("case", HELD, ids=[c["id"] for c in HELD])
def test_every_held_out_case_is_predicted_or_says_why(case: dict[str, Any]) -> None:
    assert lookup(case["gpu"]["key"]) is not None
    if not predictable(case):
        assert case.get("unpredictable_reason"), case["id"]
        return
    scored = score(case)
    reported = case["reported"]
    tokens = reported.get("kv_cache_tokens") or reported["gpu_blocks"] * 16
    assert scored.reported_tokens == tokens
    assert scored.account.kv_tokens > 0 and scored.token_error is not None
    assert scored.account.lines[0].startswith(_FIRST_LINE[_wording(case)])


_FIRST_LINE = {
    "v1": "Available KV cache memory: ",
    "v0": "# GPU blocks: ",
    "sglang": "KV Cache is allocated. #tokens: ",
}


def _wording(case: dict[str, Any]) -> str:
    """Which engine log the predicted lines mirror: SGLang's, vLLM V0's or V1's."""
    return "sglang" if case["engine"] == "sglang" else case.get("vllm_generation") or "v1"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_corpus_case_is_predicted_or_says_what_is_missing(case: dict[str, Any]) -> None:
    if predictable(case):
        assert score(case).account.kv_tokens > 0
    else:
        assert "config.json" in case["unpredictable_reason"], case["id"]


def _off_h100(cases: list[dict[str, Any]]) -> list[Scored]:
    rated = (score(c) for c in cases if predictable(c) and not c["gpu"]["key"].startswith("H100"))
    return [s for s in rated if s.token_error is not None]


def test_the_new_start_ups_cover_five_gpu_models_besides_h100() -> None:
    # Issue 43's new start-ups are the committed logs off H100 (each URL pinned to a commit);
    # A100 40GB and 80GB count as one model here, and a model counts only where a case is scored.
    new = [
        c
        for c in CASES + HELD
        if c["source_kind"] == "committed_log" and not c["gpu"]["key"].startswith("H100")
    ]
    assert all(re.search(r"/blob/[0-9a-f]{40}/", c["url"]) for c in new)
    models = {c["gpu"]["key"].removesuffix("-40GB").removesuffix("-80GB") for c in new
              if predictable(c)}  # fmt: skip
    assert len(models) >= 5, models
    assert {"A100", "MI300X", "L4", "H200", "L40S", "T4"} <= models


def test_non_h100_kv_tokens_as_issue_43_measures_them() -> None:
    # Every non-H100 case in tokens, whatever its pool's share. With the engine version as the
    # source states it (the acceptance's measure), corpus and held-out together: median 5 %,
    # p90 10 %; the held-out set alone meets both too. Every case, versions unknown included,
    # keeps its median (the 2024 V0 A100 40GB and T4 threads are +75 % and more).
    corpus, held = _off_h100(CASES), _off_h100(HELD)
    assert len(corpus) >= 18 and len(held) >= 12
    stated = [s.token_error or 0.0 for s in corpus + held if s.case.get("version")]
    assert len(stated) >= 24
    median, p90 = summary(stated)
    assert median <= 0.05 and p90 <= 0.10, _table(corpus + held)
    assert summary([s.token_error or 0.0 for s in corpus + held])[0] <= 0.05
    median, p90 = summary([s.token_error or 0.0 for s in held])
    assert median <= 0.05 and p90 <= 0.10, _table(held)


def test_off_h100_a_miss_over_five_percent_names_its_uncertain_term() -> None:
    # Stricter than the 10 % rule below: on the GPUs the constants were not measured on, an
    # answer more than 5 % off must say which estimated term could be why (the tp > 1
    # non-torch figure measured on H100 carries a spread as wide as itself elsewhere).
    for s in _off_h100(CASES) + _off_h100(HELD):
        if s.token_error is not None and abs(s.token_error) > 0.05:
            assert s.account.uncertain, (s.case["id"], s.token_error)


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


def test_sliding_window_concurrency_follows_the_pool() -> None:
    # vLLM 0.10.1.1 and 0.19.0 count a request's blocks the same way for hybrid models (each
    # KV cache group's max_memory_usage_bytes; a sliding-window group needs window - 1 +
    # max_num_batched_tokens tokens): with the layer list in the case, the concurrency is off
    # only as much as the pool is.
    hybrid = [
        score(c)
        for c in CASES + HELD
        if predictable(c)
        and isinstance(c["model"].get("layer_types"), list)
        and c["reported"].get("max_concurrency")
    ]
    assert len(hybrid) >= 4
    for s in hybrid:
        assert s.token_error is not None and s.concurrency_error is not None
        assert abs(s.concurrency_error - s.token_error) < 0.002, s.case["id"]


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


def test_the_online_fp8_case_is_predicted_by_the_rule_it_revealed() -> None:
    # Held out, then the reason quantization=fp8 exists: without the rule its weights are the
    # bf16 checkpoint's and the KV pool is short by the linear weights' second byte.
    (case,) = [c for c in HELD if c["setup"].get("quantization") == "fp8"]
    with_rule = score(case)
    as_stored = score({**case, "setup": {**case["setup"], "quantization": None}})
    assert with_rule.token_error is not None and as_stored.token_error is not None
    assert abs(with_rule.token_error) < 0.01
    assert as_stored.token_error < -0.05
    assert with_rule.account.terms[0].name == "weights"
    assert "at 1 B each" in with_rule.account.terms[0].how
