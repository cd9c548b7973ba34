"""A failed host command as a file tool reports it: what timed out, or its last stderr line."""

from __future__ import annotations

from sleuth.tools.program_run import last_stderr_line


def command_failure(stderr: bytes, code: int | None, timed_out: bool, path: str) -> str:
    if timed_out:
        return f"timed out on {path}; narrow the path or pattern"
    return f"failed on {path} (exit {code}): {last_stderr_line(stderr)}"
