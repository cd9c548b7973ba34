"""The sandbox: roots, argument hygiene, limits and approvals.

Every path a tool touches is resolved on its host (symlinks followed) and must
lie inside one of the host's roots. Commands are argument vectors; an argument
holding NUL or a newline is refused before anything runs.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.config import ApprovalRules, HostConfig, Limits
from sleuth.tools.errors import ErrorKind
from sleuth.tools.hosts import Host, HostError, RunResult
from sleuth.tools.remote import SECRET_RUNNER, program, with_secrets
from sleuth.tools.results import ToolError


class PolicyError(ToolError):
    """The sandbox refused; the message says why and how to widen it if that is intended."""

    default_kind = ErrorKind.POLICY


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


def check_arg(value: str, what: str = "argument") -> str:
    if "\x00" in value or "\n" in value or "\r" in value:
        raise PolicyError(f"{what} {value!r} contains NUL or a line break; refused")
    return value


class SandboxedHost:
    """A host seen through its policy: only paths inside its roots, only capped commands."""

    def __init__(
        self,
        name: str,
        host: Host,
        config: HostConfig,
        limits: Limits,
        config_source: str | None = None,
    ) -> None:
        self.name, self.host, self.config, self.limits = name, host, config, limits
        self.config_source = config_source or "sleuth.toml"
        self._real_roots: list[str] | None = None

    @property
    def real_roots(self) -> list[str]:
        """The configured roots as the host resolves them. A root that is a symlink is refused."""
        if self._real_roots is None:
            resolved = []
            for root in self.config.roots:
                st = self.host.stat(root)
                if st.kind == "symlink":
                    target = self.host.realpath(root)
                    raise PolicyError(
                        f"root {root} on host {self.name!r} is a symlink to {target}; a root "
                        f"must be a real folder so a changed link cannot widen it. Put "
                        f"{target!r} in `roots` of [hosts.{self.name}] in {self.config_source}"
                    )
                if st.kind == "missing":
                    continue
                resolved.append(self.host.realpath(root))
            self._real_roots = resolved
        return self._real_roots

    def resolve(self, path: str) -> str:
        """Resolve `path` on the host; relative paths are taken from the first root."""
        check_arg(path, "path")
        if not path:
            raise PolicyError("empty path; give a path inside " + self._roots_text())
        base = self.config.roots[0] if self.config.roots else "/"
        joined = posixpath.normpath(posixpath.join(base, path))
        try:
            real = self.host.realpath(joined)
        except HostError as exc:
            # Refuse before revealing whether something outside the roots exists.
            if not self.contains(posixpath.normpath(joined)):
                raise self._outside(path, joined, True) from exc
            raise ToolError(str(exc), exc.kind) from exc
        if not self.contains(real):
            raise self._outside(path, real, self.host.stat(real).kind == "dir")
        return real

    def contains(self, real: str) -> bool:
        """Whether a resolved path lies inside one of the roots."""
        return any(
            real == root or real.startswith(root.rstrip("/") + "/") for root in self.real_roots
        )

    def _roots_text(self) -> str:
        return ", ".join(self.real_roots or self.config.roots) or "(no roots)"

    def _outside(self, asked: str, real: str, is_dir: bool) -> PolicyError:
        """The refusal, with the one root that would allow exactly this path: the folder itself,
        or the file's own folder; never a wider parent (not `/` for `/etc`). A path that does
        not resolve is taken as the folder asked for."""
        shown = asked if asked == real else f"{asked} (resolves to {real})"
        widened = [*self.config.roots, real if is_dir else posixpath.dirname(real) or "/"]
        return PolicyError(
            f"{shown} is outside the roots of host {self.name!r}: {self._roots_text()}. "
            f"To allow it, set `roots = {widened!r}` under [hosts.{self.name}] in "
            f"{self.config_source}"
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        max_bytes: int | None = None,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> RunResult:
        for arg in argv:
            check_arg(arg)
        return self.host.run(
            argv,
            timeout=self.limits.timeout_s if timeout is None else timeout,
            max_bytes=self.limits.max_output_bytes if max_bytes is None else max_bytes,
            stdin=stdin,
            retry=retry,
        )

    def run_program(
        self,
        name: str,
        args: Sequence[str],
        *,
        python: str | None = None,
        timeout: float | None = None,
        max_bytes: int | None = None,
        retry: bool = True,
        secrets: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run Sleuth's program `name` (sleuth/tools/remote/) with the host's python, or with
        `python`; its source goes in on stdin, so a model never supplies code. `secrets`
        (header values, tokens) follow it on stdin, never on the command line."""
        head = ["-c", SECRET_RUNNER] if secrets is not None else ["-"]
        return self.run(
            [python or self.config.python, *head, *args],
            stdin=with_secrets(name, secrets) if secrets is not None else program(name),
            timeout=timeout,
            max_bytes=max_bytes,
            retry=retry,
        )

    def check_allowed(self, tool: str) -> None:
        if tool not in self.config.allow:
            allow = [*self.config.allow, tool]
            raise PolicyError(
                f"{tool} changes the host and is not allowed on host {self.name!r}. To permit "
                f"it, set `allow = {allow!r}` under [hosts.{self.name}] in {self.config_source}"
            )
