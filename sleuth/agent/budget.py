"""Budgets: what a run has spent, what it costs, and which limit (if any) it has reached."""

from __future__ import annotations

import time

from sleuth.config import Budget, ConfigError, ModelPrice, Settings
from sleuth.transcripts.events import Totals, Usage


def price_for(model: str | None, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`, also matching dated names (claude-sonnet-4-5-20250929)."""
    if not model:
        return None
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def price_or_refuse(model: str | None, settings: Settings) -> ModelPrice | None:
    """The model's price; None when it has none and no cost limit depends on one.

    A cost budget the user set (flag or sleuth.toml) cannot be kept without a price, so an
    unpriced model with one is a usage error raised before any request. The built-in default
    budget does not count: a local model then runs with its cost untracked (and said so).
    """
    price = price_for(model, settings.prices)
    if model and price is None and "max_cost_usd" in settings.budget.model_fields_set:
        raise ConfigError(
            f"a cost budget (max_cost_usd ${settings.budget.max_cost_usd:.2f}) was set, but model "
            f"{model!r} has no price, so its cost cannot be counted. Give one in sleuth.toml "
            f'([prices."{model}"] input = ..., output = ..., USD per million tokens) or with '
            "--price-input/--price-output, or drop the cost limit"
        )
    return price


def untracked_cost_note(model: str | None, price: ModelPrice | None) -> str | None:
    """Said once at the start of a run whose model has no price."""
    if model is None or price is not None:
        return None
    return (
        f"cost is not tracked for model {model!r}: it has no price (add "
        f'[prices."{model}"] to sleuth.toml to count it)'
    )


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

    def deadline(self) -> float:
        """time.monotonic() at which the wall-time budget is spent."""
        return self._started + self.budget.max_wall_s

    def output_left(self) -> int:
        return max(0, self.budget.max_output_tokens - self.totals.output_tokens)

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
