"""Approval of mutating calls under `sleuth mcp`: the user answers through elicitation.

A client that declares elicitation is asked, inside the call, on a connection that can carry
a server request (the initialize-handshake era); on a 2026-07-28 connection, which cannot,
the call returns `InputRequiredResult` and the client calls again with the user's answer.
A client that cannot be asked gets the host's rules (`ServeState.fallback`), which refuse
by default. A client never approves by a flag of its own (issue 18, item 2).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio.from_thread
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from sleuth.mcp.state import ServeState
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest, Approver
from sleuth.tools.registry import all_tools
from sleuth.tools.results import ToolError
from sleuth.transcripts.redact import redact

BY = "elicitation"
INPUT_KEY = "approval"
"""The key of the one input request a pending mutating call carries."""
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this call, which changes the host.",
            "default": True,
        }
    },
    "required": ["approve"],
}


def cannot_ask(request: ApprovalRequest) -> ApprovalDecision:
    """The host's rules when the client has no way to ask its user: refuse, and say how."""
    return ApprovalDecision(
        approved=False,
        by="host rules",
        reason=f"this MCP client cannot ask you to approve it (no elicitation support) and the "
        f"host's rules do not; use a client that supports elicitation, or run it yourself with "
        f"`sleuth tool {request.tool} --host {request.host} --yes`",
    )


def message(request: ApprovalRequest) -> str:
    shown = json.dumps(request.input, indent=2, ensure_ascii=False)
    return redact(
        f"Sleuth: {request.tool} changes host {request.host!r}. Run it with these inputs?\n{shown}"
    )


def decision(result: types.ElicitResult) -> ApprovalDecision:
    if result.action == "accept" and (result.content or {}).get("approve") is True:
        return ApprovalDecision(approved=True, by=BY)
    why = {"accept": "not approved in the form", "decline": "declined", "cancel": "dismissed"}
    return ApprovalDecision(
        approved=False, by=BY, reason=f"{why.get(result.action, result.action)} by the user"
    )


def can_elicit(ctx: ServerRequestContext[Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def approver_for_call(
    ctx: ServerRequestContext[Any], state: ServeState, params: types.CallToolRequestParams
) -> Approver:
    """Who decides this call: the user's recorded answer, a live question, or the host rules."""
    answered = (params.input_responses or {}).get(INPUT_KEY)
    if isinstance(answered, types.ElicitResult) and params.request_state == _state(params):
        given = decision(answered)
        return lambda request: given
    if can_elicit(ctx) and ctx.session.can_send_request:
        return _asking(ctx)
    return state.fallback or cannot_ask


def pending_approval(
    ctx: ServerRequestContext[Any],
    state: ServeState,
    name: str,
    raw: dict[str, Any],
    params: types.CallToolRequestParams,
) -> types.InputRequiredResult | None:
    """On a connection that cannot carry a server request, the question the call must wait for.

    None when nothing needs asking: a read-only tool, an answer already given, a client that
    cannot be asked, or a call the policy refuses anyway (it is refused with its fix instead).
    """
    if ctx.session.can_send_request or not can_elicit(ctx):
        return None
    if INPUT_KEY in (params.input_responses or {}):
        return None
    spec = all_tools().get(name)
    if spec is None or not spec.mutating:
        return None
    try:
        args = spec.input_model.model_validate(raw)
        state.ctx.host(args.host).check_allowed(name)
    except (ValidationError, ToolError):
        return None
    request = ApprovalRequest(tool=name, host=args.host, input=args.model_dump())
    form = types.ElicitRequestFormParams(message=message(request), requested_schema=SCHEMA)
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: types.ElicitRequest(params=form)},
        request_state=_state(params),
    )


def _state(params: types.CallToolRequestParams) -> str:
    """Binds an answer to the call it was asked for: a different call's answer does not fit."""
    body = [params.name, dict(params.arguments or {})]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _asking(ctx: ServerRequestContext[Any]) -> Approver:
    """Ask from the worker thread the call runs in, on the event loop that owns the session."""

    async def ask(request: ApprovalRequest) -> ApprovalDecision:
        try:
            result = await ctx.session.elicit_form(
                message(request), SCHEMA, related_request_id=ctx.request_id
            )
        except (MCPError, ValidationError) as exc:
            return ApprovalDecision(
                approved=False, by=BY, reason=f"the client could not ask the user: {exc}"
            )
        return decision(result)

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        return anyio.from_thread.run(ask, request)

    return approve
