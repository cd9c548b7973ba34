"""An Ansible inventory as Sleuth's groups: `[groups] from_inventory = "inventory.yml"`.

```python
listing = inventory_listing(Path("inventory.ini"))   # the shape `ansible-inventory --list` prints
groups, hosts = sleuth_groups(listing, roots=["/models"])
```

Reads the three forms teams keep: INI, YAML, and the JSON that `ansible-inventory --list`
prints (for inventories built by plugins or scripts). INI and YAML are read into that same
JSON shape (direct hosts and children per group, each host's effective variables in
`_meta.hostvars`), and one converter makes Sleuth's groups (each with every host beneath it)
and hosts (`ansible_host`, `ansible_port` and `ansible_user` as the SSH target). Host ranges
(`gpu-[01:16]`, `node-[a:c]`) are expanded as Ansible does. Variables are merged as Ansible
merges them: `all`, then parents before children, siblings by name, then the host's own.
"""

from __future__ import annotations

import json
import re
import shlex
from ast import literal_eval
from pathlib import Path
from typing import Any

import yaml  # PyYAML: Ansible inventories are YAML

Listing = dict[str, Any]
_RANGE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\]")
KEPT = ("ansible_host", "ansible_port", "ansible_user")


class InventoryError(ValueError):
    """The inventory cannot be read; the message names the file and the line."""


def expand(pattern: str) -> list[str]:
    """`gpu-[01:03]` -> gpu-01, gpu-02, gpu-03 (leading zeros kept; letters too)."""
    match = _RANGE.search(pattern)
    if match is None:
        return [pattern]
    start, end, step = match.group(1), match.group(2), int(match.group(3) or 1)
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1, step)]
    else:
        values = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    return [name for value in values for name in expand(head + value + tail)]


class _Tree:
    """Groups as Ansible builds them, before variables are merged."""

    def __init__(self) -> None:
        self.hosts: dict[str, list[str]] = {"all": [], "ungrouped": []}
        self.children: dict[str, list[str]] = {"all": [], "ungrouped": []}
        self.group_vars: dict[str, dict[str, Any]] = {}
        self.host_vars: dict[str, dict[str, Any]] = {}

    def group(self, name: str) -> None:
        self.hosts.setdefault(name, [])
        self.children.setdefault(name, [])

    def add_host(self, group: str, name: str, variables: dict[str, Any]) -> None:
        self.group(group)
        if name not in self.hosts[group]:
            self.hosts[group].append(name)
        self.host_vars.setdefault(name, {}).update(variables)

    def add_child(self, parent: str, child: str) -> None:
        self.group(parent)
        self.group(child)
        if child not in self.children[parent]:
            self.children[parent].append(child)

    def listing(self) -> Listing:
        parents: dict[str, set[str]] = {}
        for parent, kids in self.children.items():
            for kid in kids:
                parents.setdefault(kid, set()).add(parent)
        top = [g for g in self.children if g != "all" and not parents.get(g)]
        self.children["all"] = sorted(set(self.children["all"]) | set(top))
        grouped = {h for g, hs in self.hosts.items() if g not in ("all", "ungrouped") for h in hs}
        self.hosts["ungrouped"] = [
            h for h in [*self.hosts["all"], *self.hosts["ungrouped"]] if h not in grouped
        ]
        self.hosts["all"] = []
        out: Listing = {"_meta": {"hostvars": {}}}
        for name in self.children:
            entry: dict[str, list[str]] = {}
            if self.hosts.get(name):
                entry["hosts"] = list(self.hosts[name])
            if self.children.get(name):
                entry["children"] = list(self.children[name])
            out[name] = entry
        for host in self.host_vars:
            out["_meta"]["hostvars"][host] = self._merged(host, parents)
        return out

    def _merged(self, host: str, parents: dict[str, set[str]]) -> dict[str, Any]:
        """Ansible's order: groups by depth below `all` (a group one deeper than its deepest
        parent), then by name; the host's own variables last."""
        depths: dict[str, int] = {}

        def depth(group: str, seen: frozenset[str] = frozenset()) -> int:
            if group not in depths:
                above = [p for p in parents.get(group, set()) if p not in seen]
                depths[group] = 1 + max((depth(p, seen | {group}) for p in above), default=0)
            return depths[group]

        groups: set[str] = set()
        todo = [g for g, members in self.hosts.items() if host in members]
        while todo:
            group = todo.pop()
            if group not in groups:
                groups.add(group)
                todo += parents.get(group, set())
        groups.discard("all")
        merged: dict[str, Any] = dict(self.group_vars.get("all", {}))
        for group in sorted(groups, key=lambda g: (depth(g), g)):
            merged.update(self.group_vars.get(group, {}))
        merged.update(self.host_vars.get(host, {}))
        return merged


def _ini_value(text: str, literal: bool) -> Any:
    if not literal:
        return text
    try:
        return literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def from_ini(text: str, source: str) -> Listing:
    tree, section, kind = _Tree(), "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section, _, kind = line[1:-1].partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(f"{source}:{number}: unknown section kind {kind!r}")
            tree.group(section)
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InventoryError(f"{source}:{number}: {exc}") from exc
        if kind == "children":
            tree.add_child(section, words[0])
        elif kind == "vars":
            key, _, value = line.partition("=")
            tree.group_vars.setdefault(section, {})[key.strip()] = value.strip()
        else:
            pattern, *pairs = words
            variables = {}
            for pair in pairs:
                key, eq, value = pair.partition("=")
                if not eq:
                    raise InventoryError(f"{source}:{number}: {pair!r} is not key=value")
                variables[key] = _ini_value(value, literal=True)
            name, port = pattern, None
            if re.fullmatch(r"[^:\[\]]+:\d+", pattern):
                name, port = pattern.rsplit(":", 1)
            for host in expand(name):
                tree.add_host(
                    section, host, {**({"ansible_port": int(port)} if port else {}), **variables}
                )
    return tree.listing()


def from_yaml(data: Any, source: str) -> Listing:
    tree = _Tree()

    def group(name: str, body: Any) -> None:
        tree.group(name)
        body = body or {}
        if not isinstance(body, dict):
            raise InventoryError(f"{source}: group {name!r} is not a mapping")
        for pattern, variables in (body.get("hosts") or {}).items():
            for host in expand(str(pattern)):
                tree.add_host(name, host, dict(variables or {}))
        tree.group_vars.setdefault(name, {}).update(body.get("vars") or {})
        for child, child_body in (body.get("children") or {}).items():
            tree.add_child(name, str(child))
            group(str(child), child_body)

    if not isinstance(data, dict):
        raise InventoryError(f"{source}: a YAML inventory is a mapping of groups")
    for name, body in data.items():
        group(str(name), body)
    return tree.listing()


def inventory_listing(path: Path) -> Listing:
    """The inventory at `path` in the shape `ansible-inventory --list` prints."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"cannot read inventory {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("{"):
        try:
            listing: Listing = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InventoryError(f"{path}: not valid JSON: {exc}") from exc
        return listing
    if path.suffix in (".yml", ".yaml"):
        try:
            return from_yaml(yaml.safe_load(text), str(path))
        except yaml.YAMLError as exc:
            raise InventoryError(f"{path}: not valid YAML: {exc}") from exc
    return from_ini(text, str(path))


def members(listing: Listing, group: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Every host beneath `group`, children's hosts included, in order, once."""
    entry = listing.get(group) or {}
    found = list(entry.get("hosts") or [])
    for child in entry.get("children") or []:
        if child not in seen:
            found += members(listing, child, seen | {group})
    return list(dict.fromkeys(found))


def ssh_target(name: str, variables: dict[str, Any]) -> str:
    """`user@host:port` from the host's Ansible connection variables."""
    user = variables.get("ansible_user")
    port = variables.get("ansible_port")
    address = str(variables.get("ansible_host") or name)
    return (f"{user}@" if user else "") + address + (f":{int(port)}" if port else "")


def sleuth_groups(listing: Listing) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Sleuth's groups (every inventory group but `all` and `ungrouped`, with all hosts
    beneath it) and each host's SSH target."""
    hostvars = (listing.get("_meta") or {}).get("hostvars") or {}
    groups = {
        name: members(listing, name)
        for name in listing
        if name not in ("_meta", "all", "ungrouped") and members(listing, name)
    }
    hosts = {
        host: ssh_target(host, hostvars.get(host) or {})
        for host in members(listing, "all") + members(listing, "ungrouped")
    }
    for name in groups.values():
        for host in name:
            hosts.setdefault(host, ssh_target(host, hostvars.get(host) or {}))
    return groups, hosts
