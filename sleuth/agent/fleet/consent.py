"""Consent for a fleet call of a mutating tool: only a rule that names the group gives it.

```toml
[groups.decode.approve]        # `stop_server` on host="@decode" runs on every member
tools = ["stop_server"]        # that allows it; no --yes, no prompt fans one out
```

The fleet call itself is decided first (every member must `allow` the tool, and the group's
rules must approve it); then each member's part is decided the same way and recorded as its
own approval, so every host that changed says which rule let it.
"""

from __future__ import annotations

from sleuth.errors import ErrorKind, ToolError
from sleuth.tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    decide,
    rule_approval,
    rule_to_write,
    shown_input,
)
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import Tool, ToolInput
from sleuth.transcripts.fleet import is_fleet_host


def fleet_consent(
    ctx: ToolContext, spec: Tool, args: ToolInput, group: str
) -> tuple[ApprovalRequest, ApprovalDecision]:
    """The request and decision for a mutating call on `group` (the fleet call, or one
    member's part of it), by the group's rules alone. Raises PolicyError when a member does
    not allow the tool."""
    known = ctx.groups.get(group)
    if known is None or not known.members:
        raise ToolError(
            f"unknown host group @{group}; define it under [groups] in sleuth.toml",
            ErrorKind.UNKNOWN_HOST,
        )
    whole = is_fleet_host(args.host)
    for host in known.members if whole else [args.host]:
        ctx.host(host).check_allowed(spec.name)
    member = args.model_copy(update={"host": known.members[0]}) if whole else args
    config = ctx.host(member.host).config
    raw = args.model_dump()
    python, env = args.chosen_python(), raw.get("env")
    request = ApprovalRequest(
        tool=spec.name,
        host=args.host,
        input=shown_input(raw),
        argv=spec.argv(config, member) if spec.argv else ([python] if python else None),
        env=sorted(env) if isinstance(env, dict) else [],
        rules=known.approve,
        rules_from=f"groups.{group}.approve",
        program=python,
    )
    return request, decide(request, lambda r: by_group_rule(r, len(known.members)))


def by_group_rule(request: ApprovalRequest, hosts: int) -> ApprovalDecision:
    decided = rule_approval(request)
    if decided is not None:
        return decided
    return ApprovalDecision(
        approved=False,
        by="rule",
        rule=request.rules_key,
        reason=f"{request.tool} changes hosts, and a fleet call of it runs only under a rule "
        f"that names the group: no --yes or prompt fans it out to {hosts} hosts. "
        f"To permit it, set {rule_to_write(request)} under [{request.rules_key}] in sleuth.toml",
    )
