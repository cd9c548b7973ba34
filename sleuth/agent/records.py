"""The transcript events a tool call and its approval become: built here, recorded by the call
pipeline (`agent/calls.py`) for every caller."""

from __future__ import annotations

from typing import Any

from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.results import ToolResult


def tool_event(call_id: str, name: str, raw: dict[str, Any], result: ToolResult) -> ToolExecuted:
    """The call as recorded: the result the model was given (already redacted), embedded."""
    return ToolExecuted(
        call_id=call_id, tool=name, input=raw, host=str(raw.get("host", "local")), result=result
    )


def approval_event(
    call_id: str, request: ApprovalRequest, decision: ApprovalDecision
) -> ApprovalEvent:
    """The decision, with the input as shown for approval (environment values hidden), the
    command line and the environment names."""
    return ApprovalEvent(
        call_id=call_id,
        tool=request.tool,
        host=request.host,
        input=request.input,
        argv=request.argv,
        env=request.env,
        approved=decision.approved,
        by=decision.by,
        reason=decision.reason,
        rule=decision.rule,
    )
