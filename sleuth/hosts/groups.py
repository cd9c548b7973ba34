"""Which hosts a run uses: `--host` names, `--hosts` groups, patterns and lists, and the groups
a fleet call may name.

```python
chosen = select_hosts(settings, names=["gpu1"], specs=["decode", "gpu-p*,gpu-x"])
chosen.names            # the run's hosts, in the order given
chosen.groups["decode"] # a HostGroup: its members in this run and its approval rules
chosen.settings         # the settings, with a [hosts] entry for each member that only
                        # ~/.ssh/config knows (roots, python and allow from its group)
```

A pattern is a shell glob (`gpu-d*`, `node-[0-7]`) over the hosts of sleuth.toml and the
concrete aliases of ~/.ssh/config. Every run has the group `all` (its hosts but `local`);
each configured group is there with the members the run has.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.config import (
    ALL_HOSTS,
    LOCAL,
    ApprovalRules,
    ConfigError,
    GroupConfig,
    HostConfig,
    Settings,
)

SSH_CONFIG = Path("~/.ssh/config")
_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class HostGroup:
    """A group as a run sees it: its members among the run's hosts, and its approval rules."""

    name: str
    members: tuple[str, ...]
    approve: ApprovalRules = field(default_factory=ApprovalRules)


@dataclass(frozen=True)
class Selection:
    settings: Settings
    names: list[str]
    groups: dict[str, HostGroup]

    def target(self, spec: str) -> str:
        """The group a fleet call over `--hosts spec` names: the group itself, else `all`."""
        return spec if spec in self.groups else ALL_HOSTS


def ssh_aliases(path: Path | None = None) -> list[str]:
    """The concrete `Host` names of an ssh config (no patterns, no negations)."""
    from sleuth.hosts.ssh.endpoint import load_ssh_config  # paramiko: only when it is needed

    config = load_ssh_config((path or SSH_CONFIG).expanduser())
    return sorted(h for h in config.get_hostnames() if not (_GLOB & set(h)) and "!" not in h)


def select_hosts(
    settings: Settings,
    names: Sequence[str] = (),
    specs: Sequence[str] = (),
    ssh_config: Path | None = None,
) -> Selection:
    """The run's hosts and groups. Raises ConfigError naming the fix for an unknown name or a
    group or pattern that matches no host."""
    aliases = ssh_aliases(ssh_config) if specs or settings.groups else []
    resolver = _Resolver(settings, aliases)
    chosen = list(dict.fromkeys([*names, *(h for s in specs for h in resolver.spec(s))]))
    hosts = {**settings.hosts, **{n: c for n, c in resolver.made.items() if n in chosen}}
    run = set(chosen)
    groups = {ALL_HOSTS: HostGroup(ALL_HOSTS, tuple(h for h in chosen if h != LOCAL))}
    for name, group in settings.groups.items():
        members = tuple(h for h in resolver.group(name, strict=False) if h in run)
        if members:
            groups[name] = HostGroup(name, members, group.approve)
    return Selection(settings.model_copy(update={"hosts": hosts}), chosen, groups)


class _Resolver:
    def __init__(self, settings: Settings, aliases: list[str]) -> None:
        self.settings = settings
        self.aliases = aliases
        self.known = [h for h in settings.hosts if h != LOCAL] + [
            a for a in aliases if a not in settings.hosts
        ]
        self.made: dict[str, HostConfig] = {}
        self.pod_members: dict[str, list[str]] = {}
        """Each group of pods as kubectl listed it when this run chose its hosts."""
        """Hosts only ~/.ssh/config knows, configured from the first group that names them."""

    def spec(self, spec: str) -> list[str]:
        """One `--hosts` value: a comma list of groups, patterns and names."""
        items = [item.strip() for item in spec.split(",") if item.strip()]
        if not items:
            raise ConfigError(f"--hosts {spec!r} names no host; give a group, a pattern or names")
        return [host for item in items for host in self.item(item)]

    def item(self, item: str) -> list[str]:
        if item in self.settings.groups:
            return self.group(item, strict=True)
        if item == ALL_HOSTS:
            return self.matching("*", "--hosts all")
        if _GLOB & set(item):
            return self.matching(item, f"pattern {item!r}")
        if item == LOCAL or item in self.settings.hosts:
            return [item]
        if item in self.aliases:
            self.made.setdefault(item, HostConfig(ssh=item))
            return [item]
        raise ConfigError(self._unknown(item))

    def group(self, name: str, strict: bool) -> list[str]:
        config = self.settings.groups[name]
        if config.pods is not None:
            return self.pods(name, config) if strict else list(self.pod_members.get(name, []))
        found: list[str] = []
        for pattern in config.hosts:
            if _GLOB & set(pattern):
                found += [h for h in self.known if fnmatch.fnmatchcase(h, pattern)]
            elif pattern in self.settings.hosts or pattern in self.aliases:
                found.append(pattern)
            elif strict:
                raise ConfigError(f"group {name!r}: {self._unknown(pattern)}")
        for host in found:
            if host not in self.settings.hosts:
                self.made.setdefault(
                    host,
                    HostConfig(
                        ssh=host, roots=config.roots, python=config.python, allow=config.allow
                    ),
                )
        if not found and strict:
            raise ConfigError(
                f"group {name!r} ({config.hosts!r} in {self._where()}) matches no host: "
                f"{self._candidates()}. Fix its patterns, or add the hosts to ~/.ssh/config "
                f"or as [hosts.NAME] tables"
            )
        return list(dict.fromkeys(found))

    def pods(self, name: str, config: GroupConfig) -> list[str]:
        """A group of pods: kubectl on its via host lists them now, one host per pod."""
        from sleuth.hosts.container.pods import pod_hosts  # opens the via host

        if name not in self.pod_members:
            made = pod_hosts(self.settings, name, config)
            clash = [pod for pod in made if pod in self.settings.hosts]
            if clash:
                raise ConfigError(
                    f"group {name!r}: pod {clash[0]!r} has the name of a host in "
                    f"{self._where()}; rename that host"
                )
            self.made.update(made)
            self.pod_members[name] = list(made)
        return list(self.pod_members[name])

    def matching(self, pattern: str, what: str) -> list[str]:
        found = [h for h in self.known if fnmatch.fnmatchcase(h, pattern)]
        if not found:
            raise ConfigError(
                f"{what} matches no host: {self._candidates()}. Give a pattern that matches "
                f"some of them, or add the hosts to ~/.ssh/config"
            )
        for host in found:
            if host not in self.settings.hosts:
                self.made.setdefault(host, HostConfig(ssh=host))
        return found

    def _unknown(self, name: str) -> str:
        groups = ", ".join(sorted(self.settings.groups)) or "none"
        return (
            f"unknown host or group {name!r}. Groups: {groups}; {self._candidates()}. Add it to "
            f'{self._where()} as [hosts.{name}] with ssh = "{name}" and its roots, or as a Host '
            f"in ~/.ssh/config, or use a pattern such as {name[:3]}*"
        )

    def _candidates(self) -> str:
        listed = ", ".join(self.known[:20]) + (" ..." if len(self.known) > 20 else "")
        return f"hosts: {listed or 'none'}"

    def _where(self) -> str:
        return self.settings.source or "sleuth.toml"
