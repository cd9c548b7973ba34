"""Sending to the collector from one background thread, so a run never waits on it.

    sender = Sender(span_exporter, metric_exporter, warn=print)
    tracer_provider.add_span_processor(sender)     # ended spans queue here
    sender.add_metrics(data)
    sender.close(timeout_s=5)                      # before the command exits

Spans are sent in batches (what ended in the last `delay_s`). A collector that refuses or is
not there is reported once, through `warn`, and not tried again: the run goes on, and `close`
gives up after `timeout_s`, so a dead collector never holds the command's exit for long.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from sleuth.telemetry.settings import Destination

DELAY_S = 0.5
"""How long the sender gathers ended spans before it sends them in one request."""
FLUSH_S = 5.0
"""The longest `close` waits for the collector before the command goes on without it."""


class Sender(SpanProcessor):
    """Queues ended spans and metrics and sends them from its own thread."""

    def __init__(
        self,
        spans: SpanExporter,
        metrics: MetricExporter | None,
        warn: Callable[[str], None],
        where: str,
        delay_s: float = DELAY_S,
    ) -> None:
        self._spans_out, self._metrics_out = spans, metrics
        self._warn, self._where, self._delay = warn, where, delay_s
        self._spans: list[ReadableSpan] = []
        self._metrics: list[MetricsData] = []
        self._cond = threading.Condition()
        self._closing = False
        self._hurry = False
        self._sending = False
        self.failed = False
        self.sent_spans = 0
        self._thread = threading.Thread(target=self._run, name="sleuth-otlp", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._queue(self._spans, span)

    def add_metrics(self, data: MetricsData | None) -> None:
        if data is not None and self._metrics_out is not None:
            self._queue(self._metrics, data)

    def _queue(self, into: list[ReadableSpan] | list[MetricsData], item: object) -> None:
        with self._cond:
            if not self.failed:
                into.append(item)  # type: ignore[arg-type]
                self._cond.notify()

    def flush(self, timeout_s: float = FLUSH_S) -> None:
        """Send what is queued now and wait for it (at most `timeout_s`): a session that ended
        is sent before anything can stop the process (`sleuth mcp` exits on SIGTERM)."""
        with self._cond:
            self._hurry = True
            self._cond.notify_all()
            self._cond.wait_for(
                lambda: self.failed or not (self._spans or self._metrics or self._sending),
                timeout_s,
            )

    def close(self, timeout_s: float = FLUSH_S) -> bool:
        """Send what is queued, waiting at most `timeout_s`; True when all of it went."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout_s)
        sent = not self._thread.is_alive() and not self.failed
        if self._thread.is_alive():
            self._fail(f"it did not answer within {timeout_s:g} s")
        # Ends any retry still waiting; a request in flight finishes on its own (daemon) thread.
        self._spans_out.shutdown()
        if self._metrics_out is not None:
            self._metrics_out.shutdown(timeout_millis=0)
        return sent

    def shutdown(self) -> None:
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # `close` flushes; the provider's own flush has nothing to add

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closing or self._spans or self._metrics)
                # Gather what ends in the next moment into one request, unless told to hurry.
                self._cond.wait_for(lambda: self._closing or self._hurry, self._delay)
                spans, self._spans = self._spans, []
                metrics, self._metrics = self._metrics, []
                done, self._hurry, self._sending = self._closing, False, True
            self._send(spans, metrics)
            with self._cond:
                self._sending = False
                self._cond.notify_all()
                if done and not (self._spans or self._metrics):
                    return

    def _send(self, spans: Sequence[ReadableSpan], metrics: Sequence[MetricsData]) -> None:
        if self.failed:
            return
        if spans:
            if self._spans_out.export(spans) is not SpanExportResult.SUCCESS:
                return self._fail("it did not take the spans")
            self.sent_spans += len(spans)
        if metrics:
            assert self._metrics_out is not None
            # One request for every segment that ended since the last one.
            merged = MetricsData([rm for data in metrics for rm in data.resource_metrics])
            if self._metrics_out.export(merged) is not MetricExportResult.SUCCESS:
                return self._fail("it did not take the metrics")
        return None

    def _fail(self, why: str) -> None:
        with self._cond:
            first, self.failed = not self.failed, True
            self._spans, self._metrics = [], []
            self._cond.notify_all()
        if first:
            self._warn(
                f"telemetry: the collector at {self._where} cannot be reached or refused the "
                f"export ({why}); the run goes on without exporting"
            )


TIMEOUTS = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")


def otlp_sender(destination: Destination, warn: Callable[[str], None]) -> Sender:
    """A sender to the destination's OTLP/HTTP (protobuf) endpoints. The exporters read the
    other standard variables (headers, compression, certificates); a request waits at most
    FLUSH_S unless OTEL_EXPORTER_OTLP_TIMEOUT says otherwise."""
    # The exporters log each failure and retry; the sender says it once, through `warn`.
    logging.getLogger("opentelemetry").addHandler(logging.NullHandler())
    logging.getLogger("opentelemetry").propagate = False
    timeout = None if any(os.environ.get(name) for name in TIMEOUTS) else FLUSH_S
    spans = OTLPSpanExporter(endpoint=destination.traces, timeout=timeout)
    metrics = (
        OTLPMetricExporter(endpoint=destination.metrics, timeout=timeout)
        if destination.metrics
        else None
    )
    return Sender(spans, metrics, warn, destination.traces)
