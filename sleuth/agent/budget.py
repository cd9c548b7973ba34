"""Budgets: what a run has spent, what it costs, and which limit (if any) it has reached."""

from __future__ import annotations

import time

from sleuth.config import Budget, ModelPrice
from sleuth.transcripts.events import Totals, Usage


def price_for(model: str | None, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`, also matching dated names (claude-sonnet-4-5-20250929)."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def cost_of(usage: Usage, price: ModelPrice | None) -> float:
    if price is None:
        return 0.0
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    ) / 1_000_000


class Meter:
    """Counts a run's spending against its Budget.

    `input_tokens` counts every prompt token, cached or not, because the limit is
    about how much the model was asked to read.
    """

    def __init__(self, budget: Budget, price: ModelPrice | None, start: Totals | None = None):
        self.budget, self.price = budget, price
        self.totals = start.model_copy() if start else Totals()
        self._started = time.monotonic() - self.totals.wall_s

    def add_turn(self, usage: Usage) -> float:
        cost = cost_of(usage, self.price)
        t = self.totals
        t.turns += 1
        t.input_tokens += usage.input_tokens
        t.output_tokens += usage.output_tokens
        t.cache_read_tokens += usage.cache_read_tokens
        t.cache_write_tokens += usage.cache_write_tokens
        t.cost_usd += cost
        return cost

    def tool_calls_left(self) -> int:
        return max(0, self.budget.max_tool_calls - self.totals.tool_calls)

    def add_tool_calls(self, n: int) -> None:
        self.totals.tool_calls += n

    def snapshot(self) -> Totals:
        self.totals.wall_s = time.monotonic() - self._started
        return self.totals.model_copy()

    def exhausted(self) -> str | None:
        """The first limit reached, said for a person, or None while there is room."""
        b, t = self.budget, self.snapshot()
        prompt = t.input_tokens + t.cache_read_tokens + t.cache_write_tokens
        checks = [
            (t.turns >= b.max_turns, f"max_turns ({b.max_turns}) reached"),
            (t.tool_calls >= b.max_tool_calls, f"max_tool_calls ({b.max_tool_calls}) reached"),
            (prompt >= b.max_input_tokens, f"max_input_tokens ({b.max_input_tokens}) reached"),
            (
                t.output_tokens >= b.max_output_tokens,
                f"max_output_tokens ({b.max_output_tokens}) reached",
            ),
            (t.cost_usd >= b.max_cost_usd, f"max_cost_usd (${b.max_cost_usd:.2f}) reached"),
            (t.wall_s >= b.max_wall_s, f"max_wall_s ({b.max_wall_s:.0f} s) reached"),
        ]
        return next((why for hit, why in checks if hit), None)
