"""The question families the playbook knows: the built-ins, then any a plugin registers.

A family from another package registers through the entry-point group
`sleuth.playbooks`, naming a `Family` (see `sleuth.agent.playbook.plan`):

```toml
# the plugin's pyproject.toml
[project.entry-points."sleuth.playbooks"]
weather = "sleuth_weather:FAMILY"
```

Families are loaded once, on the first question. A plugin that fails to load (an import
error, an object that is not a `Family`, a name already taken) is left out and named in
`problems()`; the other families work as before.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from sleuth.agent.playbook.plan import Family, Question

ENTRY_POINT_GROUP = "sleuth.playbooks"
BUILT_IN = tuple(
    f"sleuth.agent.playbook.{name}"
    for name in ("mtp", "quant", "arch", "engine", "env", "serve", "capacity", "fleet", "live")
)
"""In the order the families are listed to a person; `Family.rank` orders the routing."""


@dataclass(frozen=True)
class _Loaded:
    families: tuple[Family, ...]
    problems: tuple[str, ...]


@functools.cache
def _loaded() -> _Loaded:
    # Imported here, not above: the families import the tools' models, which a command that
    # only names this module (to build a brain it may never run) need not pay for.
    families = [importlib.import_module(module).FAMILY for module in BUILT_IN]
    problems: list[str] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        family, problem = _plugin(point, {f.name for f in families})
        if family is not None:
            families.append(family)
        if problem:
            problems.append(problem)
    return _Loaded(tuple(families), tuple(problems))


def _plugin(point: EntryPoint, taken: set[str]) -> tuple[Family | None, str]:
    where = f"playbook family plugin {point.name!r} ({point.value})"
    try:
        family = point.load()
    except Exception as exc:  # a plugin's import can fail any way at all; it must not stop ours
        return None, f"{where} did not load: {type(exc).__name__}: {exc}"
    if not isinstance(family, Family):
        return None, f"{where} is a {type(family).__name__}, not a playbook Family"
    if family.name in taken:
        return None, f"{where} is left out: a family named {family.name!r} already exists"
    return family, ""


def families() -> tuple[Family, ...]:
    """Every family: the built-ins, then the plugins' in the order they were found."""
    return _loaded().families


def problems() -> tuple[str, ...]:
    """Why each plugin that was left out was left out, naming it."""
    return _loaded().problems


def claimant(q: Question) -> Family | None:
    """The family a question belongs to: the first, by rank, that claims it."""
    ranked = sorted(families(), key=lambda f: f.rank)  # stable: equal ranks keep their order
    return next((f for f in ranked if f.routes(q)), None)


def route(q: Question) -> str | None:
    """The name of the family a question belongs to, or None."""
    family = claimant(q)
    return family.name if family else None
