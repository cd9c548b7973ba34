"""`sleuth show` and `sleuth verify`: read a recorded transcript, tell it or check it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sleuth.cli.common import (
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    TranscriptFile,
    console,
    err_console,
    escape,
    fail,
    plural,
    print_json,
)
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.transcripts.allowed_signers import (
    AllowedSigners,
    AllowedSignersError,
    read_allowed_signers,
)
from sleuth.transcripts.ledger import LedgerError, ledger_path
from sleuth.transcripts.render import FORMATS, Banner, render
from sleuth.transcripts.render.text import render_rich
from sleuth.transcripts.sign import NAMESPACE, head_bytes
from sleuth.transcripts.store import TranscriptError, load_data, read_transcript
from sleuth.transcripts.verify import VerifyReport, signed_head, verify, verify_bytes

EXIT_INTEGRITY_ONLY = EXIT_BUDGET
"""3, as for `ask`: finished without a fault, but short of a trustworthy answer; here, an
intact transcript that nothing proves the author of."""


@shared_options("config")
def show(
    transcript: TranscriptFile,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")
    ] = "text",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
    *,
    opts: SharedOptions,
) -> None:
    """Tell an investigation: `sleuth verify`'s verdict first, then the findings and summary,
    then each turn's calls.

    The verdict is verify's own (chain, signatures against [sign] allowed_signers, the
    ledger, the end): a transcript that fails is shown under a NOT VERIFIED banner naming the
    first bad line.

    Example: sleuth show transcripts/20261129T093012Z-ab12.jsonl --format html -o report.html
    """
    if fmt not in FORMATS:
        fail(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", EXIT_USAGE)
    against = opts.anchors(opts.settings())
    try:  # one read: what is shown is what was judged
        data = read_transcript(transcript)
        banner = Banner.of(verify_bytes(transcript, data, against))
        loaded = load_data(transcript, data)
    except (TranscriptError, LedgerError) as exc:
        fail(str(exc))
    if loaded.torn_tail:
        err_console.print(
            f"[yellow]warning:[/] {escape(str(transcript))}: {escape(loaded.torn_tail)}"
        )
    events = loaded.events
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
    styles = {"signed": "bold green", "failed": "bold red"}
    style = styles.get(report.verdict, "bold yellow")
    console.print(f"[{style}]{escape(report.headline)}[/]", highlight=False)  # the verdict first
    if report.problems:
        title = (
            f"{escape(report.transcript)}: {plural(len(report.problems), 'problem')}, "
            f"{plural(report.events, 'line')} checked"
        )
        table = Table("line", "kind", "problem", title=title)
        for problem in report.problems:
            table.add_row(str(problem.line), problem.kind, escape(problem.message))
        console.print(table)
    for signer in report.signers:
        who = ", ".join(signer.principals) or "(signer not checked)"
        key = escape(f"{signer.key_type} {signer.fingerprint}")
        console.print(
            f"events {signer.first}-{signer.covers - 1} appended and signed by {escape(who)}: "
            f"{key} ({escape(signer.where)})",
            highlight=False,
        )
    if report.ledger is not None:
        n = report.ledger.entries
        console.print(
            f"ledger: {n} {'entry' if n == 1 else 'entries'} for this session; "
            f"{escape(report.ledger.message)}",
            highlight=False,
        )
    if report.torn_tail:
        console.print(f"[yellow]warning:[/] {escape(report.torn_tail)}")
    if not report.ended and report.events:
        console.print(
            "[yellow]note:[/] no session_ended event: the session did not finish"
            " (or its last events were cut off)."
        )


def _allowed(given: Path | None, configured: str | None) -> AllowedSigners | None:
    path = given or (Path(configured).expanduser() if configured else None)
    if path is None:
        return None
    try:
        return read_allowed_signers(path)
    except AllowedSignersError as exc:
        fail(str(exc), EXIT_USAGE)


def _export_head(transcript: Path, target: Path) -> None:
    """Write the newest signed head's bytes to `target` and its signature to `target`.sig,
    and say how to check them with ssh-keygen alone."""
    signed = signed_head(transcript)
    if signed is None:
        fail(f"{transcript} has no signed head to export (unsigned, or its chain is broken)")
    head, signature = signed
    signature_file = target.with_name(target.name + ".sig")
    try:
        target.write_bytes(head_bytes(head.session_id, head.seq, head.hash))
        signature_file.write_text(signature, encoding="ascii")
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    err_console.print(
        f"wrote the signed head (event {head.seq}) to {target} and its signature to "
        f"{signature_file}; check them with: ssh-keygen -Y verify -f ALLOWED_SIGNERS -I "
        f"PRINCIPAL -n {NAMESPACE} -s {signature_file} < {target}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@shared_options("as_json", "config")
def verify_cmd(
    transcript: TranscriptFile,
    allowed_signers: Annotated[
        Path | None,
        typer.Option(
            "--allowed-signers",
            help="OpenSSH allowed_signers file: who may sign (default: [sign] allowed_signers).",
        ),
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option("--ledger", help="The ledger to check against (default: the local one)."),
    ] = None,
    export_head: Annotated[
        Path | None,
        typer.Option(
            "--export-head",
            help="Write the newest signed head's bytes here (and its signature to FILE.sig), "
            "for ssh-keygen -Y verify.",
        ),
    ] = None,
    *,
    opts: SharedOptions,
) -> None:
    """Check a transcript's schema, hash chain, end, signatures and ledger entry.

    Exit codes: 0 a run that ended, signed by an allowed signer over every event; 1 tampered
    or invalid (the line and why: an edit, an event after session_ended, a signature that
    fails or an unknown signer, a ledger entry that differs, is forged or is not the only one
    for the session); 3 intact but short of that: signed only through an event where the run
    did not end, not signed, the signer not checked, or events no signature vouches for.
    Example: sleuth verify transcripts/20261129T093012Z-ab12.jsonl --allowed-signers signers
    """
    settings = opts.settings()
    signers = _allowed(allowed_signers, settings.sign.allowed_signers)
    try:
        report = verify(
            transcript, allowed_signers=signers, ledger=ledger or ledger_path(settings.ledger.path)
        )
    except (TranscriptError, LedgerError) as exc:
        fail(str(exc))
    if export_head is not None:
        _export_head(transcript, export_head)
    if opts.as_json:
        print_json(report)
    else:
        _print_report(report)
    codes = {
        "signed": EXIT_OK,
        "signed_prefix": EXIT_INTEGRITY_ONLY,
        "integrity_only": EXIT_INTEGRITY_ONLY,
        "failed": EXIT_ERROR,
    }
    raise typer.Exit(codes[report.verdict])
