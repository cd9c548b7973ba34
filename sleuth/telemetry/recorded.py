"""Recorded runs as spans and metrics (`sleuth export otel`), with the times they were recorded.

    spans, metrics = convert_files([Path("transcripts/20261129T093012Z-ab12.jsonl")])
    write_otlp_json(Path("run.otlp.jsonl"), spans, metrics)     # or
    sent = send(destination, spans, metrics, warn=print)

The converter is the one live export uses, and ids derive from the transcript, so a run
exported from its file gives the spans it gave live (and the same ids, however often it is
exported). A transcript that does not verify is refused: an edited trail is not the record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.metrics.export import MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sleuth.telemetry.convert import Converter
from sleuth.telemetry.otlp_json import metrics_json, traces_json
from sleuth.telemetry.sdk import PlannedIds, resource, scope, tracer
from sleuth.telemetry.send import otlp_sender
from sleuth.telemetry.settings import Destination
from sleuth.transcripts.ledger import LedgerError
from sleuth.transcripts.store import TranscriptError
from sleuth.transcripts.verify import Anchors, load_verified, not_verified


class ExportError(Exception):
    """A transcript cannot be exported; the message says which and why."""


def convert_files(
    paths: Sequence[Path],
    content: bool = False,
    tools: frozenset[str] = frozenset(),
    against: Anchors | None = None,
) -> tuple[list[ReadableSpan], list[MetricsData]]:
    """Every transcript's spans (in the order they ended) and its segments' metrics; `tools`:
    the registered tools' names, the only ones that leave without content; a transcript
    `sleuth verify` fails against `against` (allowed signers, ledger) is refused."""
    collected = InMemorySpanExporter()
    planned, res, sc = PlannedIds(), resource(), scope()
    trc, _ = tracer(SimpleSpanProcessor(collected), planned, res)
    metrics: list[MetricsData | None] = []
    for path in paths:
        try:
            report, loaded = load_verified(path, against)
        except (TranscriptError, LedgerError) as exc:
            raise ExportError(str(exc)) from exc
        if loaded is None:
            raise ExportError(f"{path}: {not_verified(report)}")
        converter = Converter(
            trc, planned, res, sc, str(Path(path).resolve()), content, tools=tools
        )
        metrics += [converter.feed(event) for event in loaded.events]
        metrics.append(converter.finish())
    return list(collected.get_finished_spans()), [m for m in metrics if m is not None]


def write_otlp_json(
    out: Path, spans: Sequence[ReadableSpan], metrics: Sequence[MetricsData]
) -> None:
    """OTLP/JSON lines, as the OTLP file exporter writes them: the spans' export request, then
    one metrics request per segment."""
    lines = [traces_json(spans)] if spans else []
    lines += [metrics_json(data) for data in metrics]
    try:
        out.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from exc


def send(
    destination: Destination,
    spans: Sequence[ReadableSpan],
    metrics: Sequence[MetricsData],
    warn: Callable[[str], None],
) -> bool:
    """Send to the collector; False (and one warning) when it did not take everything."""
    sender = otlp_sender(destination, warn)
    for span in spans:
        sender.on_end(span)
    for data in metrics:
        sender.add_metrics(data)
    return sender.close()
