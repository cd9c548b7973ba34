"""A segment's measurements as OTLP metrics: the GenAI client histograms and Sleuth's cost.

    points = [Point(TOKEN_USAGE, 812, {"gen_ai.token.type": "input", ...}), ...]
    data = metrics_data(points, resource, scope, start_ns, end_ns)   # -> MetricsData

Built as data rather than through a Meter, so each point carries the transcript's times (a run
exported from its file a week later still reports when it ran). Delta temporality: each
segment reports what it spent between its start and its end.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.util.types import AttributeValue

from sleuth.telemetry.conventions import DURATION_BUCKETS, SCHEMA_URL, TOKEN_BUCKETS

Attributes = dict[str, AttributeValue]


@dataclass(frozen=True)
class Instrument:
    name: str
    unit: str
    description: str
    buckets: tuple[float, ...] | None
    """A histogram's explicit bounds; None for a monotonic sum."""


TOKEN_USAGE = Instrument(
    "gen_ai.client.token.usage", "{token}", "Number of input and output tokens used.", TOKEN_BUCKETS
)
DURATION = Instrument(
    "gen_ai.client.operation.duration", "s", "GenAI operation duration.", DURATION_BUCKETS
)
COST = Instrument(
    "sleuth.client.cost",
    "{USD}",
    "What the model turns cost, at the prices configured for the model.",
    None,
)


@dataclass(frozen=True)
class Point:
    instrument: Instrument
    value: float
    attributes: Attributes = field(default_factory=dict)


def metrics_data(
    points: Sequence[Point],
    resource: Resource,
    scope: InstrumentationScope,
    start_ns: int,
    end_ns: int,
) -> MetricsData | None:
    """The points, aggregated by instrument and attributes; None when there are none."""
    if not points:
        return None
    metrics = []
    for instrument in dict.fromkeys(p.instrument for p in points):
        series: dict[tuple[tuple[str, AttributeValue], ...], list[float]] = {}
        for p in points:
            if p.instrument == instrument:
                series.setdefault(tuple(sorted(p.attributes.items())), []).append(p.value)
        metrics.append(_metric(instrument, series, start_ns, end_ns))
    scoped = ScopeMetrics(scope=scope, metrics=metrics, schema_url=SCHEMA_URL)
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(resource=resource, scope_metrics=[scoped], schema_url=SCHEMA_URL)
        ]
    )


def _metric(
    instrument: Instrument,
    series: dict[tuple[tuple[str, AttributeValue], ...], list[float]],
    start_ns: int,
    end_ns: int,
) -> Metric:
    data: Histogram | Sum
    if instrument.buckets is None:
        data = Sum(
            data_points=[
                NumberDataPoint(dict(key), start_ns, end_ns, sum(values))
                for key, values in series.items()
            ],
            aggregation_temporality=AggregationTemporality.DELTA,
            is_monotonic=True,
        )
    else:
        bounds = instrument.buckets
        data = Histogram(
            data_points=[
                _histogram_point(dict(key), values, bounds, start_ns, end_ns)
                for key, values in series.items()
            ],
            aggregation_temporality=AggregationTemporality.DELTA,
        )
    return Metric(instrument.name, instrument.description, instrument.unit, data)


def _histogram_point(
    attributes: Attributes,
    values: list[float],
    bounds: tuple[float, ...],
    start_ns: int,
    end_ns: int,
) -> HistogramDataPoint:
    counts = [0] * (len(bounds) + 1)
    for value in values:
        # A bucket holds values up to and including its upper bound.
        counts[bisect.bisect_left(bounds, value)] += 1
    return HistogramDataPoint(
        attributes=attributes,
        start_time_unix_nano=start_ns,
        time_unix_nano=end_ns,
        count=len(values),
        sum=sum(values),
        bucket_counts=counts,
        explicit_bounds=list(bounds),
        min=min(values),
        max=max(values),
    )
