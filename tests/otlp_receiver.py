"""A real OTLP/HTTP receiver for tests: it decodes each POST to /v1/traces and /v1/metrics with
the `opentelemetry-proto` classes (ExportTraceServiceRequest, ExportMetricsServiceRequest) and
keeps what it got, as a collector would.

    with OtlpReceiver() as receiver:
        run(["sleuth", "ask", ..., "--otlp-endpoint", receiver.url])
        spans = receiver.spans()        # flat: name, ids, parent, kind, attributes, events
        points = receiver.points("gen_ai.client.token.usage")
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]
    status: int
    resource: dict[str, Any] = field(default_factory=dict)
    scope_schema: str = ""


class OtlpReceiver:
    """Listens on 127.0.0.1 (a free port); `url` is the base an exporter is given."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                receiver._take(self.path, body, dict(self.headers))
                reply = (
                    ExportTraceServiceResponse()
                    if self.path.endswith("traces")
                    else ExportMetricsServiceResponse()
                ).SerializeToString()
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        with self._lock:
            self.headers.append(headers)
            if path == "/v1/traces":
                self.traces.append(ExportTraceServiceRequest.FromString(body))
            elif path == "/v1/metrics":
                self.metrics.append(ExportMetricsServiceRequest.FromString(body))

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            requests = list(self.traces)
        return [span for request in requests for span in flat_spans(request)]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, data point) of every point of `metric` received."""
        with self._lock:
            requests = list(self.metrics)
        found = []
        for request in requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name != metric:
                            continue
                        data = getattr(m, m.WhichOneof("data"))
                        found += [(attributes(p.attributes), p) for p in data.data_points]
        return found


def flat_spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    out = []
    for rs in request.resource_spans:
        res = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        kind=s.kind,
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=attributes(s.attributes),
                        events=[(e.name, attributes(e.attributes)) for e in s.events],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        status=s.status.code,
                        resource=res,
                        scope_schema=ss.schema_url,
                    )
                )
    return out
