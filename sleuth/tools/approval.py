"""Approval of mutating calls, as data: the host's rules first, then a fallback.

```python
approver = approver_for("yes")               # sleuth ask --yes
decision = approver(ApprovalRequest(tool="launch_server", host="gpu1", input={...}))
decision.rule                                # e.g. "hosts.gpu1.approve.engines: sglang"
```
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.config import ApprovalRules


class ApprovalRequest(BaseModel):
    tool: str
    host: str
    input: dict[str, Any]
    argv: list[str] | None = None
    """The command line the call would run, when the tool can say before it runs."""
    rules: ApprovalRules = Field(default_factory=ApprovalRules)
    """The host's approval rules (sleuth.toml `[hosts.NAME.approve]`)."""


class ApprovalDecision(BaseModel):
    approved: bool
    by: str
    """Who or what decided: "rule", "--yes", "interactive", "non-interactive", a test name."""
    reason: str = ""
    rule: str = ""
    """The rule that decided, e.g. `hosts.gpu1.approve.commands[0]`, `--yes`, `prompt`."""


Approver = Callable[[ApprovalRequest], ApprovalDecision]
Fallback = Literal["yes", "ask", "refuse", "person"]
"""What decides a call no rule approves: `sleuth ask --yes` ("yes"), a person at the
terminal ("ask"), nobody ("refuse"), or a person who typed `sleuth tool NAME --yes` for
this one call ("person")."""


def deny_all(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(
        approved=False,
        by="default",
        reason=f"{request.tool} changes host {request.host!r}; rerun with --yes to approve it",
    )


def is_custom_command(request: ApprovalRequest) -> bool:
    """A launch whose program the model chose: engine=command, or a preset with its own
    `python`. Only a `commands` rule (or a person) approves one."""
    return request.tool == "launch_server" and (
        request.input.get("engine") == "command" or request.input.get("python") is not None
    )


def rule_approval(request: ApprovalRequest) -> ApprovalDecision | None:
    """The host's rule that approves this call without asking, or None."""
    rules, key = request.rules, f"hosts.{request.host}.approve"
    if is_custom_command(request):
        argv = request.argv or []
        for i, prefix in enumerate(rules.commands):
            if argv[: len(prefix)] == prefix:
                return ApprovalDecision(
                    approved=True, by="rule", rule=f"{key}.commands[{i}] = {json.dumps(prefix)}"
                )
        return None
    if request.tool == "launch_server":
        engine = request.input.get("engine")
        if engine in rules.engines:
            return ApprovalDecision(approved=True, by="rule", rule=f"{key}.engines: {engine}")
        return None
    if request.tool in rules.tools:
        return ApprovalDecision(approved=True, by="rule", rule=f"{key}.tools: {request.tool}")
    return None


def approver_for(
    fallback: Fallback, ask: Callable[[ApprovalRequest], bool] | None = None
) -> Approver:
    """The host's rules first; a call none approves goes to `fallback`. `ask` shows a person
    the request and returns their answer (needed for "ask")."""

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        if decided := rule_approval(request):
            return decided
        if fallback == "person":
            return ApprovalDecision(approved=True, by="--yes", rule="sleuth tool --yes")
        custom = is_custom_command(request)
        if fallback == "yes" and custom:
            return _unmatched_command(request)
        if fallback == "yes":
            allowed = f"hosts.{request.host}.allow: {request.tool}"
            return ApprovalDecision(approved=True, by="--yes", rule=f"--yes with {allowed}")
        if fallback == "ask" and ask is not None:
            ok = ask(request)
            return ApprovalDecision(
                approved=ok,
                by="interactive",
                rule="prompt",
                reason="" if ok else "declined at the prompt",
            )
        if custom:
            return _unmatched_command(request)
        rule = (
            f'engines = ["{request.input.get("engine")}"]'
            if request.tool == "launch_server"
            else f'tools = ["{request.tool}"]'
        )
        return ApprovalDecision(
            approved=False,
            by="non-interactive",
            rule="no rule",
            reason=f"no rule approves it and there was no one to ask; rerun with --yes to "
            f"approve {request.tool}, or set `{rule}` under [hosts.{request.host}.approve] "
            f"in sleuth.toml",
        )

    return approve


def _unmatched_command(request: ApprovalRequest) -> ApprovalDecision:
    key = f"hosts.{request.host}.approve.commands"
    return ApprovalDecision(
        approved=False,
        by="rule",
        rule=key,
        reason=f"the command {json.dumps(request.argv)} matches no rule in {key} "
        f"({json.dumps(request.rules.commands)}); `sleuth ask --yes` never approves a custom "
        f"command no rule matches. To permit it, add its argv prefix to `commands` under "
        f"[hosts.{request.host}.approve] in sleuth.toml, or run it yourself: "
        f"`sleuth tool launch_server ... --yes`",
    )
