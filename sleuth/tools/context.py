"""What a running tool may reach, and how a command builds it from configuration.

```python
ctx = build_context(settings, ["gpu1"], approver=approver_for("ask", ask=prompt))
sandbox = ctx.host("gpu1")      # a SandboxedHost: its roots, limits and allowed tools
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sleuth.config import FleetSettings, Limits, PrometheusSettings, Settings
from sleuth.errors import ErrorKind, ToolError
from sleuth.hosts.connect import sandboxed_hosts
from sleuth.hosts.groups import HostGroup
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest, Approver, deny_all
from sleuth.transcripts.results import ToolResult


class CallTracing(Protocol):
    """Names the span of a call before it runs (telemetry on), so the engine's own spans can
    join it: `traceparent` is the W3C header value the call's HTTP requests carry."""

    def traceparent(self, session_id: str, call_id: str, parent: str | None = None) -> str:
        """`parent`: the caller's own traceparent (an MCP client's), which the call's span
        continues."""
        ...


@dataclass
class ToolContext:
    """What a running tool may reach: its hosts (sandboxed), limits and the approver."""

    hosts: dict[str, SandboxedHost]
    limits: Limits = field(default_factory=Limits)
    approver: Approver = deny_all
    on_approval: Callable[[ApprovalRequest, ApprovalDecision], None] | None = None
    """Hears every approval decision made through this context (all runs that share it)."""
    results_dir: Path = Path("bench-results")
    """Where tools save files on this machine (benchmark records); never a model's choice."""
    groups: Mapping[str, HostGroup] = field(default_factory=dict)
    """The host groups a fleet call (`host="@NAME"`) may name, with their members."""
    fleet: FleetSettings = field(default_factory=FleetSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    """Where query_metrics reads the engines' history (`[prometheus]` in sleuth.toml)."""
    subcall: Callable[[str, dict[str, Any]], ToolResult] | None = None
    """Runs another tool's call through the caller's call pipeline (consent, redaction,
    recording). The pipeline sets it for the call in progress, so a tool that drives other
    tools (ab_benchmark relaunching servers) cannot skip any of those steps."""
    tracing: CallTracing | None = None
    """Set when the run exports telemetry; the call pipeline names each call's span with it."""
    traceparent: str | None = None
    """The running call's W3C traceparent (telemetry on): launch_server's readiness probes and
    run_benchmark's requests send it, so an engine that traces (vLLM) joins the call's trace."""

    def close(self) -> None:
        """Close every host's connection."""
        for sandbox in self.hosts.values():
            sandbox.host.close()

    def host(self, name: str) -> SandboxedHost:
        try:
            return self.hosts[name]
        except KeyError:
            known = ", ".join(sorted(self.hosts)) or "(none)"
            raise ToolError(
                f"unknown host {name!r}; known hosts: {known}. Add [hosts.{name}] to sleuth.toml "
                f"or pass --host {name}",
                ErrorKind.UNKNOWN_HOST,
            ) from None


def build_context(
    settings: Settings,
    names: Iterable[str],
    *,
    approver: Approver = deny_all,
    accept_new_host_key: bool = False,
    groups: Mapping[str, HostGroup] | None = None,
) -> ToolContext:
    """A context with `local` plus each named host, connected lazily by the host itself, and
    the `groups` (`hosts.groups.select_hosts`) fleet calls may name."""
    hosts = sandboxed_hosts(settings, names, accept_new_host_key=accept_new_host_key)
    return ToolContext(
        hosts=hosts,
        limits=settings.limits,
        approver=approver,
        groups=dict(groups or {}),
        fleet=settings.fleet,
        prometheus=settings.prometheus,
    )
