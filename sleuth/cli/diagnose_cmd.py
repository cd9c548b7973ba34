"""`sleuth diagnose FILE|-`: why did this server fail (at start or while serving), from its log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from sleuth.cli.common import EXIT_BUDGET, EXIT_ERROR, EXIT_USAGE, console, escape, fail, print_json
from sleuth.cli.host_context import person_call
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.errors import ErrorKind
from sleuth.outputs import DiagnoseOutput
from sleuth.tools.serving.diagnose import Diagnosis, diagnose, render
from sleuth.tools.serving.diagnose_facts import Engine
from sleuth.tools.serving.diagnose_lines import split_lines

EXIT_UNKNOWN = EXIT_BUDGET
"""3: no rule pointed to one cause, like a run that stopped short of an answer."""
READ_BYTES = 4 << 20
"""The end of a log read; the failure is at the end."""
ENGINES: dict[str, Engine] = {"vllm": "vllm", "sglang": "sglang"}


@shared_options("as_json", "config", "accept_new_host_key", "transcripts", "no_sign")
def diagnose_file(
    log: str | None = typer.Argument(
        None, help="The server's log file, or - to read standard input; none with --container-log."
    ),
    engine: str | None = typer.Option(
        None, "--engine", help="vllm or sglang, to name its flags in the fix (guessed if absent)."
    ),
    host: str | None = typer.Option(
        None, "--host", help="With --container-log: the container or pod host whose log to read."
    ),
    container_log: bool = typer.Option(
        False,
        "--container-log",
        help="Read the container's or pod's own log (docker|podman|"
        "nerdctl logs, kubectl logs) on --host, through diagnose_log (recorded).",
    ),
    previous: bool = typer.Option(
        False,
        "--previous",
        help="With --container-log on a pod: its container's log before "
        "the last restart (a crash loop keeps the failure there).",
    ),
    *,
    opts: SharedOptions,
) -> None:
    """Explain why a vLLM or SGLang server failed, at start or while serving, from its log:
    the kind of failure, the phase, the line that states it, and the fix with the numbers the
    engine logged. Exits 0 when diagnosed, 3 when the cause is unknown.

    Example: sleuth diagnose /var/log/vllm.log
    Example: journalctl -u vllm --no-pager -o cat | sleuth diagnose -
    Example: sleuth diagnose --host sglang0 --container-log
    Example: sleuth diagnose --host decode0 --container-log --previous
    """
    if engine is not None and engine not in ENGINES:
        fail(f"--engine must be vllm or sglang, not {engine!r}", EXIT_USAGE)
    if container_log or previous or host is not None:
        source, found = _from_container(opts, host, log, container_log, previous, engine)
    elif log is None:
        fail("give the log file (or - for standard input), or --host H --container-log", EXIT_USAGE)
    else:
        source = log
        found = diagnose(split_lines(_read(log)), engine=ENGINES[engine] if engine else None)
    if opts.as_json:
        print_json(DiagnoseOutput(source=source, diagnosis=found))
    else:
        for line in render(found):
            console.print(escape(line), highlight=False, soft_wrap=True)
    if found.kind == "unknown":
        raise typer.Exit(EXIT_UNKNOWN)


def _from_container(
    opts: SharedOptions,
    host: str | None,
    log: str | None,
    container_log: bool,
    previous: bool,
    engine: str | None,
) -> tuple[str, Diagnosis]:
    """diagnose_log on a container host, through the call pipeline: its transcript records
    which container's log was read."""
    if host is None or not container_log or log is not None:
        fail("a container's log is read with --host H --container-log (no file)", EXIT_USAGE)
    inputs: dict[str, Any] = {"host": host, "container_log": True, "previous": previous}
    if engine is not None:
        inputs["engine"] = engine
    settings = opts.settings()
    seal = opts.seal(settings, quiet=True)
    ctx = opts.open_hosts(settings, [host])
    result, _ = person_call(ctx, "diagnose_log", inputs, opts.transcripts, seal)
    if not result.ok:
        usage = result.error_kind is ErrorKind.INVALID_INPUT
        fail(result.error or "diagnose_log failed", EXIT_USAGE if usage else EXIT_ERROR)
    return str(result.data["source"]), Diagnosis.model_validate(result.data["diagnosis"])


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
