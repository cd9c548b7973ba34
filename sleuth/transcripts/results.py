"""What a tool call returns: the one result shape the tools produce, the model reads, `sleuth
tool --json` prints and a `tool_executed` event embeds.

It lives with the transcripts, which import no other room of Sleuth, so the event can carry
the result itself rather than a copy of its fields. `error_kind` holds a value of
`sleuth.errors.ErrorKind` (a str enum) as its text.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

REFUSED_KINDS = frozenset({"policy", "not_approved"})
"""The ErrorKind values of a call the policy refused before anything ran."""


class ToolResult(BaseModel):
    """The one shape every tool returns; `sleuth tool NAME --json` prints exactly this."""

    ok: bool
    output: str = Field("", description="The text the model sees, capped, truncation marked.")
    data: Any = Field(None, description="Structured result, when the tool has one.")
    error: str | None = Field(None, description="What went wrong and what to do, when not ok.")
    error_kind: str | None = Field(
        None, description="What kind of failure, when not ok (invalid_input, policy, ...)."
    )
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
        return self.error_kind in REFUSED_KINDS

    @classmethod
    def failure(cls, error: str, kind: str = "failed", **meta: Any) -> ToolResult:
        return cls(ok=False, output=f"error: {error}", error=error, error_kind=kind, **meta)
