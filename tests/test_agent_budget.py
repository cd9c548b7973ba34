"""Budgets: cost from the price table (cache reads and writes included) and the limits."""

from __future__ import annotations

import pytest

from sleuth.agent.budget import Meter, cost_of, price_for
from sleuth.config import DEFAULT_PRICES, Budget
from sleuth.transcripts.events import Usage


def test_dated_model_names_find_their_price() -> None:
    assert (
        price_for("claude-sonnet-4-5-20250929", DEFAULT_PRICES)
        == DEFAULT_PRICES["claude-sonnet-4-5"]
    )
    assert price_for("served-model", DEFAULT_PRICES) is None


def test_cost_counts_cache_reads_and_writes_at_their_own_prices() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=1_000_000,
    )
    # 3.00 input + 1.50 output + 0.60 cache reads + 3.75 cache writes
    assert cost_of(usage, DEFAULT_PRICES["claude-sonnet-4-5"]) == pytest.approx(8.85)


def test_the_cost_budget_stops_a_run() -> None:
    meter = Meter(Budget(max_cost_usd=1.0), DEFAULT_PRICES["claude-sonnet-4-5"])
    meter.add_turn(Usage(input_tokens=200_000))
    assert meter.exhausted() is None
    meter.add_turn(Usage(input_tokens=200_000, output_tokens=30_000))
    assert meter.exhausted() == "max_cost_usd ($1.00) reached"


def test_cached_prompt_tokens_count_against_the_input_budget() -> None:
    meter = Meter(Budget(max_input_tokens=1_000), None)
    meter.add_turn(Usage(input_tokens=10, cache_read_tokens=995))
    assert meter.exhausted() == "max_input_tokens (1000) reached"
    assert meter.snapshot().cost_usd == 0.0
