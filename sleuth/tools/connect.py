"""Turn configured hosts into sandboxed hosts and a tool context."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sleuth.config import LOCAL, ConfigError, Settings
from sleuth.tools.hosts import Host, LocalHost
from sleuth.tools.policy import Approver, SandboxedHost, deny_all
from sleuth.tools.registry import ToolContext


def open_host(settings: Settings, name: str, *, accept_new_host_key: bool = False) -> Host:
    if name == LOCAL:
        return LocalHost(LOCAL)
    config = settings.hosts.get(name)
    if config is None or config.ssh is None:
        known = ", ".join(sorted(settings.hosts))
        where = settings.source or "sleuth.toml"
        raise ConfigError(
            f"unknown host {name!r} (configured: {known}). Add it to {where}:\n"
            f'  [hosts.{name}]\n  ssh = "{name}"\n  roots = ["/models"]'
        )
    from sleuth.tools.ssh import SSHHost  # paramiko is only loaded when a remote host is used

    return SSHHost(
        name,
        config.ssh,
        known_hosts=Path(settings.known_hosts).expanduser(),
        accept_new=accept_new_host_key,
    )


def build_context(
    settings: Settings,
    names: Iterable[str],
    *,
    approver: Approver = deny_all,
    accept_new_host_key: bool = False,
) -> ToolContext:
    """A context with `local` plus each named host, connected lazily by the host itself."""
    wanted = dict.fromkeys([LOCAL, *names])
    hosts = {
        name: SandboxedHost(
            name,
            open_host(settings, name, accept_new_host_key=accept_new_host_key),
            settings.hosts[name],
            settings.limits,
            settings.source,
        )
        for name in wanted
    }
    return ToolContext(hosts=hosts, limits=settings.limits, approver=approver)
