"""Running one of Sleuth's host programs for a tool: a failure is a ToolError that says whether
the interpreter could not start the program or the program failed, with its last stderr line."""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.errors import HostError
from sleuth.hosts.host import RunResult
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.results import ToolError


def last_stderr_line(stderr: bytes) -> str:
    """What a failed command said last: the line a failure is reported with."""
    said = stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else "no message"


def run_or_fail(
    host: SandboxedHost,
    program: str,
    args: Sequence[str],
    *,
    python: str | None,
    timeout: float,
    not_run: str,
    failed: str,
    hint: str = "",
) -> RunResult:
    """`program`'s run on `host`; ToolError "`not_run` on host ...: why" when it cannot start,
    "`failed` on host ... (exit N): its last line`hint`" when it exits non-zero."""
    try:
        run = host.run_program(program, args, python=python, timeout=timeout)
    except HostError as exc:
        raise ToolError(f"{not_run} on host {host.name!r}: {exc}", exc.kind) from exc
    if run.exit_code != 0:
        raise ToolError(
            f"{failed} on host {host.name!r} (exit {run.exit_code}): "
            f"{last_stderr_line(run.stderr)}{hint}"
        )
    return run
