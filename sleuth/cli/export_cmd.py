"""`sleuth export otel`: recorded runs, as OpenTelemetry spans and metrics, for the tools
operators already watch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    console,
    fail,
    plural,
    print_json,
    require_otel,
    warn,
)
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.tools.registry import all_tools

export_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Export recorded runs to the tools operators already watch.\n\n"
    "Example: sleuth export otel transcripts/*.jsonl --endpoint http://127.0.0.1:4318",
)


@export_app.command("otel")
@shared_options("otel_content", "as_json", "config")
def otel(
    transcripts: Annotated[
        list[Path], typer.Argument(help="Transcript files (.jsonl) to export.", show_default=False)
    ],
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            metavar="URL",
            help="The OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (default: "
            "OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="OUT.json",
            help="Write OTLP/JSON here instead (one export request per line), for a collector's "
            "file receiver or a later upload.",
        ),
    ] = None,
    *,
    opts: SharedOptions,
) -> None:
    """Send recorded runs to an OpenTelemetry collector, with the times they were recorded.

    Each transcript is one trace (a resumed run's segments included) of GenAI spans:
    invoke_agent, chat per model turn, execute_tool per call. Ids derive from the
    transcript, so exporting a run again, or after it was exported live, gives the same
    spans. A transcript `sleuth verify` fails (against [sign] allowed_signers and the ledger) is
    refused.

    Example: sleuth export otel transcripts/*.jsonl --endpoint http://127.0.0.1:4318

    Example: sleuth export otel transcripts/run.jsonl --file run.otlp.json
    """
    require_otel()
    from sleuth.telemetry import recorded
    from sleuth.telemetry.settings import SettingsError, destination

    if endpoint is not None and out is not None:
        fail("give one of --endpoint and --file", EXIT_USAGE)
    try:
        where = None if out is not None else destination(endpoint, opts.otel_content, os.environ)
    except SettingsError as exc:
        fail(str(exc), EXIT_USAGE)
    if out is not None:
        to = str(out)
    elif where is not None:
        to = where.traces
    else:
        fail(
            "give --endpoint URL (or set OTEL_EXPORTER_OTLP_ENDPOINT), or --file OUT.json",
            EXIT_USAGE,
        )
    try:
        tools = frozenset(all_tools())
        against = opts.anchors(opts.settings())
        spans, metrics = recorded.convert_files(transcripts, opts.otel_content, tools, against)
        if out is not None:
            recorded.write_otlp_json(out, spans, metrics)
        elif where is not None and not recorded.send(where, spans, metrics, warn):
            fail(f"the collector at {to} did not take the export", EXIT_ERROR)
    except recorded.ExportError as exc:
        fail(str(exc), EXIT_ERROR)
    traces = sorted({f"{s.context.trace_id:032x}" for s in spans if s.context is not None})
    if opts.as_json:
        print_json(
            {"transcripts": len(transcripts), "spans": len(spans), "traces": traces, "to": to}
        )
        return
    console.print(
        f"exported {plural(len(transcripts), 'transcript')} as {plural(len(spans), 'span')} "
        f"in {plural(len(traces), 'trace')} to {to}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
