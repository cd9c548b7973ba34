"""Live export: the events any transcript writer stores, teed into spans and metrics while a
command runs, through the same converter `sleuth export otel` uses.

    with LiveExport(destination, warn=print) as live:
        ctx.tracing = live        # the call pipeline names each call's span before it runs
        ...                       # run the command: its transcripts' events become spans
    # leaving the block sends what is left (FLUSH_S at most) before the command exits
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from opentelemetry.trace import SpanContext, TraceFlags

from sleuth.telemetry import ids
from sleuth.telemetry.convert import Converter
from sleuth.telemetry.sdk import PlannedIds, resource, scope, tracer
from sleuth.telemetry.send import Sender, otlp_sender
from sleuth.telemetry.settings import Destination
from sleuth.transcripts.events import Event, SessionEnded
from sleuth.transcripts.store import listen


class LiveExport:
    """Tees every stored event into the converter of its transcript; names calls' spans for
    the engines they call (`traceparent`). A context manager: leaving it sends what is left."""

    def __init__(
        self,
        destination: Destination,
        warn: Callable[[str], None],
        sender: Sender | None = None,
        send_each_session: bool = False,
        tools: frozenset[str] = frozenset(),
    ) -> None:
        """Nothing starts until the block is entered; `sender` replaces the OTLP one (tests).
        `send_each_session`: send a session's spans as soon as it ends, before anything else
        runs (a server whose process a signal may end at any time, `sleuth mcp`); otherwise
        they go in the background, and leaving the block sends the rest. `tools`: the
        registered tools' names, the only ones that leave without content."""
        self.destination = destination
        self._tools = tools
        self._send_each_session = send_each_session
        self._warn = warn
        self._given = sender
        self._sender: Sender | None = None
        self._planned = PlannedIds()
        self._resource, self._scope = resource(), scope()
        self._converters: dict[Path, Converter] = {}
        self._parents: dict[tuple[str, str], SpanContext] = {}
        self._lock = threading.Lock()
        self._broken = False
        self._stop: Callable[[], None] | None = None

    def __enter__(self) -> LiveExport:
        self._sender = self._given or otlp_sender(self.destination, self._warn)
        self._tracer, _ = tracer(self._sender, self._planned, self._resource)
        self._stop = listen(self._hear)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def traceparent(self, session_id: str, call_id: str, parent: str | None = None) -> str:
        """The W3C header naming the call's span (the span the converter gives it once the
        call is recorded); in the caller's trace when `parent` is a valid traceparent."""
        trace = ids.trace_id(session_id)
        found = ids.parse_traceparent(parent) if parent else None
        if found is not None:
            trace = found[0]
            context = SpanContext(found[0], found[1], True, TraceFlags(found[2] & 0xFF))
            with self._lock:
                self._parents[(session_id, call_id)] = context
        return ids.traceparent(trace, ids.span_id(session_id, "call", call_id))

    def close(self) -> bool:
        """Stop listening, end what the transcripts left open and send it; True when every
        span and metric reached the collector."""
        if self._stop is None or self._sender is None:
            return False
        self._stop()
        self._stop = None
        with self._lock:
            converters = list(self._converters.values())
        for converter in converters:
            self._sender.add_metrics(converter.finish())
        return self._sender.close()

    def _parent_of(self, session_id: str, call_id: str) -> SpanContext | None:
        with self._lock:
            return self._parents.pop((session_id, call_id), None)

    def _hear(self, path: Path, event: Event) -> None:
        try:
            with self._lock:
                converter = self._converters.get(path)
                if converter is None:
                    converter = self._converters[path] = Converter(
                        self._tracer,
                        self._planned,
                        self._resource,
                        self._scope,
                        str(path.resolve()),
                        self.destination.content,
                        self._parent_of,
                        self._tools,
                    )
            ended = converter.feed(event)
            if self._sender is not None:
                self._sender.add_metrics(ended)
                if self._send_each_session and isinstance(event, SessionEnded):
                    self._sender.flush()
        except Exception as exc:  # a bug in the export must never stop the investigation
            if not self._broken:
                self._broken = True
                self._warn(f"telemetry: an event could not be exported (a bug in Sleuth): {exc!r}")
