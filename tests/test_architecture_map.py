"""docs/architecture.md is the map a newcomer reads: it must name every room (each package
and top-level module of sleuth/) and lead from any tool's name to its module in one step."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from sleuth.tools.registry import all_tools

ROOT = Path(__file__).resolve().parent.parent
MAP = (ROOT / "docs" / "architecture.md").read_text()


def test_every_room_of_sleuth_is_on_the_map() -> None:
    package = ROOT / "sleuth"
    missing = []
    for init in package.rglob("__init__.py"):
        folder = init.parent.relative_to(package)
        if folder == Path(".") or "program" in folder.parts[1:]:
            continue
        # A room by its path, or a room within a room by its name in the outer room's row.
        inner = rf"`{folder.name}/`|\b{folder.name}/ \("
        if f"`sleuth/{folder}/`" not in MAP and not re.search(inner, MAP):
            missing.append(str(folder))
    for module in package.glob("*.py"):
        if module.name != "__init__.py" and f"`sleuth/{module.name}`" not in MAP:
            missing.append(module.name)
    assert sorted(missing) == []


def test_each_tool_is_found_from_its_name_in_one_step() -> None:
    table = MAP.split("### Tools by family", 1)[1].split("\n## ", 1)[0]
    for name, spec in all_tools().items():
        module = Path(inspect.getfile(spec.fn))
        family = module.parent.name
        row = next((r for r in table.splitlines() if r.startswith(f"| `{family}/` |")), None)
        assert row is not None, f"{family}/ has no row in the family table"
        tools = row.split("|")[2]
        stem = module.stem
        # The module is the tool's name, or the tool is named beside its module: `stem` (name).
        assert re.search(rf"`{stem}`( \({name}\))?", tools), (name, stem, tools)
        if stem != name:
            assert f"`{stem}` ({name})" in tools, (name, stem, tools)
