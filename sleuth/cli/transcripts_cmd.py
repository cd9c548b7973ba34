"""`sleuth show` and `sleuth verify`: read a recorded transcript, tell it or check it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    JsonFlag,
    TranscriptFile,
    console,
    err_console,
    fail,
    plural,
    print_json,
)
from sleuth.transcripts.render import FORMATS, render
from sleuth.transcripts.render.text import render_rich
from sleuth.transcripts.store import LoadedTranscript, TranscriptError, load
from sleuth.transcripts.verify import VerifyReport, not_verified, verify


def _load_or_exit(path: Path) -> LoadedTranscript:
    try:
        loaded = load(path)
    except TranscriptError as exc:
        fail(str(exc))
    if loaded.torn_tail:
        err_console.print(f"[yellow]warning:[/] {escape(str(path))}: {escape(loaded.torn_tail)}")
    return loaded


def show(
    transcript: TranscriptFile,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")
    ] = "text",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Tell an investigation: the verdicts and summary first, then each turn's calls.

    The hash chain is checked first; a transcript that fails is shown under a NOT VERIFIED
    banner naming the first bad line.

    Example: sleuth show transcripts/20261129T093012Z-ab12.jsonl --format html -o report.html
    """
    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", EXIT_USAGE)
    try:
        banner = not_verified(verify(transcript))
    except TranscriptError as exc:
        fail(str(exc))
    events = _load_or_exit(transcript).events
    if output is None and fmt == "text":
        if console.is_terminal:
            console.print(render_rich(events, banner))
            return
        fmt = "md"  # plain text for a pipe or a file: panels have no width to fit there
    rendered = render(events, fmt, banner)
    if output is None:
        typer.echo(rendered, nl=False)
        return
    try:
        output.write_text(rendered, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    err_console.print(f"wrote {escape(str(output))} ({fmt}, {len(events)} events)")


def _print_report(report: VerifyReport) -> None:
    name = escape(report.transcript)
    if report.problems:
        title = f"{name}: {plural(len(report.problems), 'problem')}"
        table = Table("line", "kind", "problem", title=title)
        for problem in report.problems:
            table.add_row(str(problem.line), problem.kind, escape(problem.message))
        console.print(table)
        first = report.problems[0].line
        console.print(
            f"[bold red]TAMPERED OR INVALID[/] from line {first}: "
            f"{plural(report.events, 'line')} checked."
        )
    else:
        events = plural(report.events, "event")
        console.print(f"[bold green]OK[/] {name}: {events}, hash chain intact.")
    if report.torn_tail:
        console.print(f"[yellow]warning:[/] {escape(report.torn_tail)}")
    if not report.ended and report.events:
        console.print(
            "[yellow]note:[/] no session_ended event: the session did not finish"
            " (or its last events were cut off)."
        )


def verify_cmd(
    transcript: TranscriptFile,
    as_json: JsonFlag = False,
) -> None:
    """Check a transcript's schema and hash chain; exit 1 naming the line of any edit.

    Example: sleuth verify transcripts/20261129T093012Z-ab12.jsonl
    """
    try:
        report = verify(transcript)
    except TranscriptError as exc:
        fail(str(exc))
    if as_json:
        print_json(report)
    else:
        _print_report(report)
    raise typer.Exit(EXIT_OK if report.ok else EXIT_ERROR)


def register(app: typer.Typer) -> None:
    app.command("show")(show)
    app.command("verify")(verify_cmd)
