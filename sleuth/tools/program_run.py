"""Running one of Sleuth's host programs for a tool: a failure is a ToolError that says whether
the interpreter could not start the program or the program failed, with its last stderr line;
and reading its answer through the tool's model (`read_answer`), so that an answer of another
shape is a ToolError naming the host and the program, never an internal error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sleuth.errors import ErrorKind, HostError
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


Model = TypeVar("Model", bound=BaseModel)


def read_answer(host: str, program: str, answer: bytes | Any, model: type[Model]) -> Model:
    """`program`'s answer on `host` (its JSON output, or JSON already parsed) as `model`.

    An answer of another shape (another version of the program, a wrapper that prints more, an
    interpreter that is not what it says) is a ToolError of kind `host` that names the host,
    the program and the first field that did not fit."""
    try:
        if isinstance(answer, bytes | str):
            return model.model_validate_json(answer)
        return model.model_validate(answer)
    except ValidationError as exc:
        raise unreadable(host, program, exc) from None


def unreadable(host: str, program: str, exc: ValidationError) -> ToolError:
    """The error for an answer of `program` on `host` that its model refused."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the answer"
    return ToolError(
        f"{program} on host {host!r} answered in a shape Sleuth cannot read ({where}: "
        f"{first['msg']}); the interpreter that ran it may not be a plain Python: set "
        f"`python` under [hosts.{host}] in sleuth.toml to one",
        ErrorKind.HOST,
    )
