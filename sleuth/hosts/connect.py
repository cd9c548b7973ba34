"""Open the configured hosts: the local one, or an SSH host resolved like `ssh` does."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sleuth.config import LOCAL, ConfigError, Settings
from sleuth.hosts.host import Host, LocalHost
from sleuth.hosts.policy import SandboxedHost


def open_host(settings: Settings, name: str, *, accept_new_host_key: bool = False) -> Host:
    if name == LOCAL:
        return LocalHost(LOCAL)
    config = settings.hosts.get(name)
    if config is not None and config.via is not None:
        from sleuth.hosts.container.host import ContainerHost

        via = open_host(settings, config.via, accept_new_host_key=accept_new_host_key)
        return ContainerHost(name, via, config)
    if config is None or config.ssh is None:
        known = ", ".join(sorted(settings.hosts))
        where = settings.source or "sleuth.toml"
        raise ConfigError(
            f"unknown host {name!r} (configured: {known}). Add it to {where}:\n"
            f'  [hosts.{name}]\n  ssh = "{name}"\n  roots = ["/models"]'
        )
    from sleuth.hosts.ssh import SSHHost  # paramiko is only loaded when a remote host is used

    return SSHHost(
        name,
        config.ssh,
        known_hosts=Path(settings.known_hosts).expanduser(),
        accept_new=accept_new_host_key,
        python=config.python,
    )


def sandboxed_hosts(
    settings: Settings, names: Iterable[str], *, accept_new_host_key: bool = False
) -> dict[str, SandboxedHost]:
    """`local` plus each named host, each behind its policy, connected lazily by the host."""
    wanted = dict.fromkeys([LOCAL, *names])
    return {
        name: SandboxedHost(
            name,
            open_host(settings, name, accept_new_host_key=accept_new_host_key),
            settings.hosts[name],
            settings.limits,
            settings.source,
        )
        for name in wanted
    }
