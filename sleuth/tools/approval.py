"""Approval of mutating calls, as data: the host's rules first, then a fallback.

```python
approver = approver_for("yes")               # sleuth ask --yes
decision = decide(ApprovalRequest(tool="launch_server", host="gpu1", input={...}), approver)
decision.rule                                # e.g. "hosts.gpu1.approve.engines: sglang"
```

Every consent goes through `decide`: a start-up environment variable (`startup_env`) that no
rule names exactly is refused before anyone is asked; then the approver, whose rules come
first. The request is built before anything runs on the host, from the call's inputs and the
host's configuration alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.config import ApprovalRules
from sleuth.tools.startup_env import EnvCover, env_cover
from sleuth.transcripts.redact import redact_env


class ApprovalRequest(BaseModel):
    tool: str
    host: str
    input: dict[str, Any]
    """The call's input as shown for approval: secret environment values hidden
    (`shown_input`)."""
    argv: list[str] | None = None
    """The command line the call would run, when the tool can say before it runs."""
    env: list[str] = Field(default_factory=list)
    """The names of the environment variables the call sets."""
    rules: ApprovalRules = Field(default_factory=ApprovalRules)
    """The host's approval rules (sleuth.toml `[hosts.NAME.approve]`), or a group's."""
    rules_from: str = ""
    """Where `rules` come from when not the host's: `groups.NAME.approve` for a fleet call."""
    program: str | None = None
    """The interpreter the model chose, for this call or a run it makes (`load.python`)."""

    @property
    def rules_key(self) -> str:
        return self.rules_from or f"hosts.{self.host}.approve"

    @property
    def env_cover(self) -> EnvCover:
        return env_cover(self.env, self.rules.env)

    @property
    def env_shown(self) -> dict[str, Any]:
        """The environment as a person judges it: names and values, secret values hidden."""
        env = self.input.get("env")
        return dict(env) if isinstance(env, dict) else dict.fromkeys(self.env, "")


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


def shown_input(raw: dict[str, Any]) -> dict[str, Any]:
    """A call's input as an approval shows and records it: the env values a person needs to
    judge (a path into a model folder) shown, those under a secret name hidden."""
    env = raw.get("env")
    if not isinstance(env, dict) or not env:
        return dict(raw)
    return {**raw, "env": redact_env({str(k): str(v) for k, v in env.items()})}


def deny_all(request: ApprovalRequest) -> ApprovalDecision:
    if is_custom_command(request):
        return _unmatched(request)
    return ApprovalDecision(
        approved=False,
        by="default",
        reason=f"{request.tool} changes host {request.host!r}; rerun with --yes to approve it",
    )


def decide(request: ApprovalRequest, approver: Approver) -> ApprovalDecision:
    """The one consent step: start-up environment names no rule names exactly are refused
    whoever would be asked; everything else is the approver's."""
    startup = request.env_cover.start_up
    if startup:
        key = f"{request.rules_key}.env"
        return ApprovalDecision(
            approved=False,
            by="rule",
            rule=key,
            reason=f"the environment sets {', '.join(startup)}, which make a program load or "
            f"run code it names; no --yes, prompt or glob approves them. If you trust this "
            f"exact use, name each under [{request.rules_key}] in sleuth.toml: "
            f"`env = {json.dumps(sorted({*request.rules.env, *startup}))}`",
        )
    return approver(request)


def is_custom_command(request: ApprovalRequest) -> bool:
    """A call whose program the model chose: launch_server engine=command, or any tool given
    its own `python` (in its input, or in the inputs of a run it makes). Only a `commands`
    rule (or a person) approves one."""
    own_program = request.tool == "launch_server" and request.input.get("engine") == "command"
    return own_program or request.program is not None


def rule_approval(request: ApprovalRequest) -> ApprovalDecision | None:
    """The host's rule that approves this call without asking, or None."""
    cover = request.env_cover
    if not cover.covered:
        return None
    decided = _program_rule(request)
    if decided is None or not cover.listed:
        return decided
    key = f"{request.rules_key}.env"
    return decided.model_copy(update={"rule": f"{decided.rule}; {key}: {', '.join(cover.listed)}"})


def _program_rule(request: ApprovalRequest) -> ApprovalDecision | None:
    rules, key = request.rules, request.rules_key
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


def rule_to_write(request: ApprovalRequest) -> str:
    """The line under [hosts.NAME.approve] that would approve this call without asking."""
    lines = []
    if is_custom_command(request):
        lines.append(f"commands = [{json.dumps(request.argv or [])}]")
    elif request.tool == "launch_server":
        lines.append(f'engines = ["{request.input.get("engine")}"]')
    else:
        lines.append(f'tools = ["{request.tool}"]')
    if request.env:
        lines.append(f"env = {json.dumps(sorted({*request.rules.env, *request.env}))}")
    return " and ".join(f"`{line}`" for line in lines)


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
        if fallback == "yes" and (is_custom_command(request) or request.env_cover.unlisted):
            return _unmatched(request)
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
        if is_custom_command(request) or request.env_cover.unlisted:
            return _unmatched(request)
        return refused_without_rule(
            request,
            "no rule approves it and there was no one to ask; rerun with --yes to "
            f"approve {request.tool}, or",
        )

    return approve


def refused_without_rule(request: ApprovalRequest, why: str) -> ApprovalDecision:
    """A refusal for a call nobody could approve: `why`, then the rule that would."""
    return ApprovalDecision(
        approved=False,
        by="non-interactive",
        rule="no rule",
        reason=f"{why} set {rule_to_write(request)} under [hosts.{request.host}.approve] in "
        f"sleuth.toml",
    )


def _unmatched(request: ApprovalRequest) -> ApprovalDecision:
    """A custom command or an environment no rule covers: `--yes` never approves one."""
    unlisted = request.env_cover.unlisted
    custom = is_custom_command(request) and _program_rule(request) is None
    key = f"hosts.{request.host}.approve.{'commands' if custom else 'env'}"
    what = (
        f"the command {json.dumps(request.argv)} matches no rule in {key} "
        f"({json.dumps(request.rules.commands)})"
        if custom
        else f"the environment names {', '.join(unlisted)}, which {key} "
        f"({json.dumps(request.rules.env)}) does not list"
    )
    return ApprovalDecision(
        approved=False,
        by="rule",
        rule=key,
        reason=f"{what}; `sleuth ask --yes` never approves a custom command or environment no "
        f"rule matches. To permit it, set {rule_to_write(request)} under "
        f"[hosts.{request.host}.approve] in sleuth.toml, or run it yourself: "
        f"`sleuth tool {request.tool} ... --yes`",
    )
