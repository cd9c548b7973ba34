"""Prometheus text as samples, read with prometheus_client's parser (the one reader of the
format on Sleuth's side; the host program only fetches)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from sleuth.tools.results import ToolError


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


def parse(text: str) -> list[Sample]:
    try:
        return [
            Sample(s.name, tuple(sorted(s.labels.items())), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]
    except ValueError as exc:
        raise ToolError(f"the /metrics page is not Prometheus text: {exc}") from exc


def first_rank(samples: Iterable[Sample]) -> list[Sample]:
    """Samples of tensor/pipeline rank 0 only: SGLang repeats a gauge on every TP rank, and
    adding them up would count one scheduler's queue tp_size times."""
    return [
        s
        for s in samples
        if s.label("tp_rank") in (None, "0") and s.label("pp_rank") in (None, "0")
    ]


def total(samples: Iterable[Sample], name: str) -> float | None:
    """The sum of `name` over its label sets (models, engines, DP ranks), or None if absent."""
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else None


def highest(samples: Iterable[Sample], name: str) -> float | None:
    values = [s.value for s in samples if s.name == name]
    return max(values) if values else None


def names(samples: Iterable[Sample]) -> set[str]:
    return {s.name for s in samples}
