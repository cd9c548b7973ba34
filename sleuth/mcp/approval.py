"""Approval of mutating calls under `sleuth mcp`: the user, through an elicitation this server
issued, or a rule in the server's sleuth.toml. A client never approves by itself.

A client that declares elicitation is asked, inside the call, on a connection that can carry
a server request (the initialize-handshake era); on a 2026-07-28 connection, which cannot,
the call returns `InputRequiredResult` with a keyed `requestState` (`consent.py`) and the
client calls again with the user's answer. An answer counts only with a state this server
issued to this session for this exact call; any other is ignored. A client that cannot be
asked gets the host's rules, and a refusal that names the rule to write.
"""

from __future__ import annotations

from typing import Any

import anyio.from_thread
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from sleuth.agent.calls import approval_request, standing_program_consent
from sleuth.errors import KindedError
from sleuth.mcp.state import ServeState
from sleuth.tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    refused_without_rule,
    rule_approval,
)
from sleuth.tools.registry import all_tools
from sleuth.transcripts.controls import shown_json
from sleuth.transcripts.redact import redact

BY = "elicitation"
INPUT_KEY = "approval"
"""The key of the one input request a pending mutating call carries."""
IGNORED = (
    "; an answer came with a requestState this server did not issue to this session for this "
    "call, and was ignored"
)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this call as the message above shows it.",
            "default": True,
        }
    },
    "required": ["approve"],
}


def message(request: ApprovalRequest) -> str:
    does = (
        f"changes host {shown_json(request.host)}"
        if all_tools()[request.tool].mutating
        else f"on host {shown_json(request.host)} runs {shown_json(request.program)}, an "
        "interpreter the model chose"
    )
    lines = [f"Sleuth: {shown_json(request.tool)} {does}. Run it with these inputs?"]
    if request.argv is not None:
        lines.append(f"It runs: {shown_json(request.argv)}")
    if request.env:
        lines.append(
            "It sets the environment variables (secret values hidden): "
            f"{shown_json(request.env_shown, sort_keys=True)}"
        )
    return redact("\n".join([*lines, shown_json(request.input, indent=2)]))


def decision(result: types.ElicitResult) -> ApprovalDecision:
    if result.action == "accept" and (result.content or {}).get("approve") is True:
        return ApprovalDecision(approved=True, by=BY, rule="elicitation answered by the user")
    why = {"accept": "not approved in the form", "decline": "declined", "cancel": "dismissed"}
    return ApprovalDecision(
        approved=False, by=BY, reason=f"{why.get(result.action, result.action)} by the user"
    )


def can_elicit(ctx: ServerRequestContext[Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def answered(
    ctx: ServerRequestContext[Any],
    state: ServeState,
    session: str,
    params: types.CallToolRequestParams,
) -> ApprovalDecision | None:
    """The user's answer to a question this server asked this session about exactly this
    call, or None: no answer, or one whose requestState does not prove that (it is ignored)."""
    given = (params.input_responses or {}).get(INPUT_KEY)
    token = params.request_state
    if not isinstance(given, types.ElicitResult) or not token or not can_elicit(ctx):
        return None
    arguments = dict(params.arguments or {})
    if not state.consent.redeem(token, session, params.name, arguments):
        return None
    return decision(given)


def forged(params: types.CallToolRequestParams) -> bool:
    """The call carries an answer or a state that `answered` did not accept."""
    return bool(params.input_responses) or params.request_state is not None


def approver_for_call(
    ctx: ServerRequestContext[Any], given: ApprovalDecision | None, ignored: bool
) -> Approver:
    """Who decides this call: the host's rules first, then the user's verified answer, a live
    question, or nobody (a refusal naming the rule to write)."""
    if given is not None:
        return _rules_first(lambda request: given)
    if can_elicit(ctx) and ctx.session.can_send_request:
        return _rules_first(_asking(ctx))
    return cannot_ask(IGNORED if ignored else "")


def cannot_ask(note: str = "") -> Approver:
    """The host's rules when the client has no way to ask its user: refuse, and say how."""

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        return rule_approval(request) or refused_without_rule(
            request,
            "this MCP client cannot ask you to approve it (it declared no elicitation "
            f"support){note}, and no rule in the server's sleuth.toml approves it. To approve "
            "such calls without asking,",
        )

    return approve


def pending_approval(
    ctx: ServerRequestContext[Any], state: ServeState, session: str, name: str, raw: dict[str, Any]
) -> types.InputRequiredResult | None:
    """On a connection that cannot carry a server request, the question the call must wait for.

    None when nothing needs asking: a read-only tool on the host's own interpreter (or one the
    host vouches for), a client that cannot be asked, a call a rule approves, or a call
    refused anyway (the policy, or a start-up environment name no rule names exactly): it is
    refused with its fix instead. The question is built from the inputs and configuration
    alone, as the pipeline builds it (the host's word on an interpreter aside).
    """
    if ctx.session.can_send_request or not can_elicit(ctx):
        return None
    spec = all_tools().get(name)
    if spec is None:
        return None
    try:
        args = spec.input_model.model_validate(raw)
        if not spec.mutating:
            standing = standing_program_consent(state.ctx, spec, args)
            if standing is None or standing[1] is not None:
                return None  # nothing to decide, or decided without asking
            request = standing[0]
        else:
            request = approval_request(state.ctx, spec, args)
    except (ValidationError, KindedError):
        return None
    if rule_approval(request) is not None or request.env_cover.start_up:
        return None  # approved, or refused whatever the user would answer
    form = types.ElicitRequestFormParams(message=message(request), requested_schema=SCHEMA)
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: types.ElicitRequest(params=form)},
        request_state=state.consent.issue(session, name, raw),
    )


def _rules_first(inner: Approver) -> Approver:
    def approve(request: ApprovalRequest) -> ApprovalDecision:
        return rule_approval(request) or inner(request)

    return approve


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
