"""Host lists written short, the way pdsh and Slurm write them: `gpu-[01-06,08-16]`.

```python
compress(["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login"])   # "gpu-[01-03,07], login"
expand(["gpu-[01-03,07]", "login"])    # ["gpu-01", "gpu-02", "gpu-03", "gpu-07", "login"]
```

Names that end in a number of the same width and share the rest are folded into one range
expression; every other name is kept as it is. `expand` undoes `compress` exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUMBERED = re.compile(r"^(.*?)(\d+)$")
_RANGED = re.compile(r"^([^\[\],]*)\[([0-9,\-]+)\]$")
_ITEM = re.compile(r"[^,\[]+(?:\[[^\]]*\])?|\[[^\]]*\]")
MAX_EXPANDED = 100_000
"""A range expression may stand for at most this many hosts."""


def compress(names: Iterable[str]) -> str:
    """The names as one short, comma-separated expression (an empty string for none)."""
    folded: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in sorted(set(names), key=natural):
        numbered = _NUMBERED.match(name)
        if numbered is None:
            plain.append(name)
            order.append(name)
            continue
        key = (numbered[1], len(numbered[2]))
        if key not in folded:
            folded[key] = []
            order.append(key)
        folded[key].append(int(numbered[2]))
    parts = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        numbers = folded[item]
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
        else:
            parts.append(f"{prefix}[{_runs(numbers, width)}]")
    return ", ".join(parts)


def expand(items: Iterable[str]) -> list[str]:
    """Every host the items name, in order, each once: names, comma lists and range
    expressions (`gpu-[01-06,08-16]`). Raises ValueError for a malformed range."""
    found: list[str] = []
    for item in items:
        for part in _ITEM.findall(item):
            found += _expand_one(part.strip())
    return list(dict.fromkeys(h for h in found if h))


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that puts gpu-2 before gpu-10."""
    return tuple(
        (0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p != ""
    )


def _runs(numbers: list[int], width: int) -> str:
    runs: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs)


def _expand_one(part: str) -> list[str]:
    ranged = _RANGED.match(part)
    if ranged is None:
        if "[" in part or "]" in part:
            raise ValueError(f"{part!r} is not a host name or a range such as gpu-[01-06,08]")
        return [part]
    prefix, body = ranged[1], ranged[2]
    names: list[str] = []
    for piece in body.split(","):
        low, _, high = piece.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{part!r}: {piece!r} is not a number or a range a-b")
        first, last = int(low), int(high or low)
        if last < first or len(names) + last - first >= MAX_EXPANDED:
            raise ValueError(f"{part!r}: the range {piece!r} is backwards or too long")
        names += [f"{prefix}{n:0{len(low)}d}" for n in range(first, last + 1)]
    return names
