"""The OpenTelemetry SDK pieces every export shares: the resource, the scope, and a tracer
whose span ids are the ones the converter planned (derived from the transcript)."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from importlib import metadata

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Tracer

from sleuth.telemetry.conventions import AGENT_NAME, SCHEMA_URL, SCOPE

MAX_EVENTS = 4096
"""Span events kept on one span: a long MCP session's root gathers one per finding."""


def version() -> str:
    try:
        return metadata.version("sleuth")
    except metadata.PackageNotFoundError:
        return "0"


def resource(env: Mapping[str, str] = os.environ) -> Resource:
    """service.name `sleuth` (OTEL_SERVICE_NAME wins) and its version, plus what
    OTEL_RESOURCE_ATTRIBUTES adds."""
    name = env.get("OTEL_SERVICE_NAME", "").strip() or AGENT_NAME
    return Resource.create({"service.name": name, "service.version": version()})


def scope() -> InstrumentationScope:
    return InstrumentationScope(SCOPE, version(), SCHEMA_URL)


class PlannedIds(IdGenerator):
    """Gives the SDK, for the span a thread starts next, the ids the converter planned."""

    def __init__(self) -> None:
        self._next = threading.local()

    def plan(self, trace: int, span: int) -> None:
        self._next.ids = (trace, span)

    def generate_span_id(self) -> int:
        return int(self._next.ids[1])

    def generate_trace_id(self) -> int:
        return int(self._next.ids[0])


def tracer(
    processor: SpanProcessor, ids: PlannedIds, res: Resource
) -> tuple[Tracer, TracerProvider]:
    """A tracer of its own (the process's global provider is left alone) that records every
    span (the transcript recorded every step) and hands each ended span to `processor`."""
    provider = TracerProvider(
        sampler=ALWAYS_ON,
        resource=res,
        id_generator=ids,
        span_limits=SpanLimits(max_events=MAX_EVENTS),
    )
    provider.add_span_processor(processor)
    return provider.get_tracer(SCOPE, version(), schema_url=SCHEMA_URL), provider
