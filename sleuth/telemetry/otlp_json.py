"""OTLP/JSON: the export requests as the OTLP specification writes them in JSON (the encoding
the OTLP file exporter and OTLP/HTTP JSON use), one request per line of a file.

Protobuf's JSON mapping is followed, except where OTLP/JSON departs from it: trace and span ids
are hex strings (not base64) and enums are integers.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import MetricsData
from opentelemetry.sdk.trace import ReadableSpan

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def traces_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ExportTraceServiceRequest as OTLP/JSON."""
    request: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in request.get("resourceSpans", []):
        for scoped in resource.get("scopeSpans", []):
            for span in scoped.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return request


def metrics_json(data: MetricsData) -> dict[str, Any]:
    """An ExportMetricsServiceRequest as OTLP/JSON."""
    request: dict[str, Any] = MessageToDict(encode_metrics(data), use_integers_for_enums=True)
    return request


def _hex_ids(item: dict[str, Any]) -> None:
    for key in ID_FIELDS:
        if item.get(key):
            item[key] = base64.b64decode(item[key]).hex()
