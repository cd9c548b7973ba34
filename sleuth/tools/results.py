"""What a tool returns, and how its output is capped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind
from sleuth.errors import ToolError as ToolError  # its home for most callers


class ToolResult(BaseModel):
    """The one shape every tool returns; `sleuth tool NAME --json` prints exactly this."""

    ok: bool
    output: str = Field("", description="The text the model sees, capped, truncation marked.")
    data: Any = Field(None, description="Structured result, when the tool has one.")
    error: str | None = Field(None, description="What went wrong and what to do, when not ok.")
    error_kind: ErrorKind | None = Field(None, description="What kind of failure, when not ok.")
    traceback: str | None = Field(
        None, description="For an internal error (a bug in Sleuth): where it was raised."
    )
    argv: list[list[str]] = Field(default_factory=list, description="Commands run on the host.")
    exit_code: int | None = None
    bytes_cut: int = 0
    duration_s: float = 0.0
    reconnected: bool = False

    @property
    def refused(self) -> bool:
        """The policy refused the call (not allowed, not approved, outside the roots): nothing
        ran."""
        return self.error_kind in (ErrorKind.POLICY, ErrorKind.NOT_APPROVED)

    @classmethod
    def failure(cls, error: str, kind: ErrorKind = ErrorKind.FAILED, **meta: Any) -> ToolResult:
        return cls(ok=False, output=f"error: {error}", error=error, error_kind=kind, **meta)


def truncation_notice(cut: int) -> str:
    return f"[truncated: {cut} more bytes]"


def cap_output(text: str, max_bytes: int, max_lines: int, already_cut: int = 0) -> tuple[str, int]:
    """Cap `text` to `max_lines` lines and `max_bytes` UTF-8 bytes, marking any cut.

    `already_cut` counts bytes the host dropped before we saw them. Returns the
    capped text and the total bytes cut.
    """
    lines = text.splitlines(keepends=True)
    cut = already_cut
    if len(lines) > max_lines:
        cut += sum(len(line.encode()) for line in lines[max_lines:])
        lines = lines[:max_lines]
    kept = "".join(lines)
    raw = kept.encode()
    if len(raw) > max_bytes:
        cut += len(raw) - max_bytes
        kept = raw[:max_bytes].decode(errors="ignore")
    if cut:
        if kept and not kept.endswith("\n"):
            kept += "\n"
        kept += truncation_notice(cut)
    return kept, cut
