"""The transcript events a tool call and its approval become: built here, recorded by the call
pipeline (`agent/calls.py`) for every caller."""

from __future__ import annotations

from typing import Any

from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.results import ToolResult


def tool_event(
    call_id: str, name: str, raw: dict[str, Any], result: ToolResult, fleet: str | None = None
) -> ToolExecuted:
    """The call as recorded: the result the model was given (already redacted), embedded;
    `fleet` names the fleet call a host's part belongs to."""
    return ToolExecuted(
        call_id=call_id,
        tool=name,
        input=raw,
        host=str(raw.get("host", "local")),
        result=result,
        fleet=fleet,
    )


def approval_event(
    call_id: str, request: ApprovalRequest, decision: ApprovalDecision
) -> ApprovalEvent:
    """The decision, with the input as shown for approval (environment values hidden), the
    command line and the environment names."""
    shown = request.model_dump(exclude={"rules", "rules_from", "program"})
    return ApprovalEvent(call_id=call_id, **shown, **dict(decision))
