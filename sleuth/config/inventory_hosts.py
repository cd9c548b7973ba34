"""`[groups] from_inventory`: an Ansible inventory's groups and hosts added to the settings.

```toml
[groups]
from_inventory = "inventory.ini"     # INI, YAML, or `ansible-inventory --list` JSON
from_inventory_roots = ["/models"]   # the roots of hosts the inventory alone knows
```

A host with its own [hosts.NAME] table keeps it; a group named in sleuth.toml and in the
inventory is refused, since either could be meant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sleuth.config.inventory import InventoryError, inventory_listing, sleuth_groups

if TYPE_CHECKING:
    from sleuth.config import Settings


def add_inventory(settings: Settings, folder: Path, inventory: Any, roots: Any, where: str) -> None:
    from sleuth.config import ConfigError, GroupConfig, HostConfig

    if not isinstance(inventory, str) or not inventory:
        raise ConfigError(f"{where}: `from_inventory` is the path of an Ansible inventory file")
    if not isinstance(roots, list) or not all(
        isinstance(r, str) and r.startswith("/") for r in roots
    ):
        raise ConfigError(f"{where}: `from_inventory_roots` is a list of absolute paths")
    path = (folder / inventory).expanduser()
    try:
        groups, hosts = sleuth_groups(inventory_listing(path))
    except InventoryError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    for name, target in hosts.items():
        if name not in settings.hosts:
            settings.hosts[name] = HostConfig(ssh=target, roots=list(roots))
    for name, members in groups.items():
        if name in settings.groups:
            raise ConfigError(
                f"{where}: group `{name}` is in sleuth.toml and in {path}; rename one"
            )
        settings.groups[name] = GroupConfig(hosts=members, roots=list(roots))
