"""The transcript events a tool call and its approval become: one place, for every caller
(the loop, `sleuth mcp` sessions, `sleuth tool` and `sleuth bench`)."""

from __future__ import annotations

from typing import Any

from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.redact import redact


def tool_event(call_id: str, name: str, raw: dict[str, Any], result: ToolResult) -> ToolExecuted:
    """The call as recorded: output and error redacted, as the model saw them."""
    return ToolExecuted(
        call_id=call_id,
        tool=name,
        input=raw,
        host=str(raw.get("host", "local")),
        ok=result.ok,
        output=redact(result.output),
        error=redact(result.error) if result.error else None,
        error_kind=result.error_kind,
        data=result.data,
        argv=result.argv,
        exit_code=result.exit_code,
        bytes_cut=result.bytes_cut,
        duration_s=result.duration_s,
        reconnected=result.reconnected,
    )


def approval_event(
    call_id: str, request: ApprovalRequest, decision: ApprovalDecision
) -> ApprovalEvent:
    return ApprovalEvent(
        call_id=call_id,
        tool=request.tool,
        host=request.host,
        input=request.input,
        approved=decision.approved,
        by=decision.by,
        reason=decision.reason,
        rule=decision.rule,
    )
