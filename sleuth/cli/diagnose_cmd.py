"""`sleuth diagnose FILE|-`: why did this server fail (at start or while serving), from its log."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sleuth.cli.common import EXIT_BUDGET, EXIT_USAGE, console, escape, fail, print_json
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.outputs import DiagnoseOutput
from sleuth.tools.serving.diagnose import diagnose, render
from sleuth.tools.serving.diagnose_facts import Engine
from sleuth.tools.serving.diagnose_lines import split_lines

EXIT_UNKNOWN = EXIT_BUDGET
"""3: no rule pointed to one cause, like a run that stopped short of an answer."""
READ_BYTES = 4 << 20
"""The end of a log read; the failure is at the end."""
ENGINES: dict[str, Engine] = {"vllm": "vllm", "sglang": "sglang"}


@shared_options("as_json")
def diagnose_file(
    log: str = typer.Argument(..., help="The server's log file, or - to read standard input."),
    engine: str | None = typer.Option(
        None, "--engine", help="vllm or sglang, to name its flags in the fix (guessed if absent)."
    ),
    *,
    opts: SharedOptions,
) -> None:
    """Explain why a vLLM or SGLang server failed, at start or while serving, from its log:
    the kind of failure, the phase, the line that states it, and the fix with the numbers the
    engine logged. Exits 0 when diagnosed, 3 when the cause is unknown.

    Example: sleuth diagnose /var/log/vllm.log
    Example: journalctl -u vllm --no-pager -o cat | sleuth diagnose -
    """
    if engine is not None and engine not in ENGINES:
        fail(f"--engine must be vllm or sglang, not {engine!r}", EXIT_USAGE)
    text = _read(log)
    found = diagnose(split_lines(text), engine=ENGINES[engine] if engine else None)
    if opts.as_json:
        print_json(DiagnoseOutput(source=log, diagnosis=found))
    else:
        for line in render(found):
            console.print(escape(line), highlight=False, soft_wrap=True)
    if found.kind == "unknown":
        raise typer.Exit(EXIT_UNKNOWN)


def _read(log: str) -> str:
    if log == "-":
        return sys.stdin.read()[-READ_BYTES:]
    path = Path(log)
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            handle.seek(max(0, size - READ_BYTES))
            return handle.read().decode(errors="replace")
    except OSError as exc:
        fail(f"cannot read {log}: {exc.strerror or exc}", EXIT_USAGE)
