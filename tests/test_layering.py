"""The rooms keep to themselves: arrows run down only (cli/mcp -> agent -> tools -> hosts), and
transcripts, errors and config are leaves that know no other room."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sleuth

PACKAGE = Path(sleuth.__file__).parent

# The rooms each room may import besides itself (sleuth.* prefixes).
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "sleuth.errors": (),
    "sleuth.config": (),
    "sleuth.transcripts": (),
    "sleuth.hosts": ("sleuth.errors", "sleuth.config"),
    "sleuth.tools": ("sleuth.errors", "sleuth.config", "sleuth.hosts", "sleuth.transcripts"),
    "sleuth.agent": ("sleuth.errors", "sleuth.config", "sleuth.tools", "sleuth.transcripts"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {n for n in names if n.startswith("sleuth")}


def room_of(module: str) -> str | None:
    return next((r for r in MAY_IMPORT if module == r or module.startswith(r + ".")), None)


def test_every_import_runs_down_the_layers() -> None:
    offenders = []
    walked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        room = room_of(module_name(path))
        if room is None:
            continue
        walked += 1
        allowed = (room, *MAY_IMPORT[room])
        offenders += [
            f"{module_name(path)} imports {name}"
            for name in imported(path)
            if not any(name == a or name.startswith(a + ".") for a in allowed)
        ]
    assert offenders == []
    assert walked > 60  # the walk found the rooms' modules


@pytest.mark.parametrize("room", ["sleuth.hosts.program"])
def test_programs_sent_to_hosts_import_only_the_standard_library(room: str) -> None:
    folder = PACKAGE.joinpath(*room.split(".")[1:])
    for path in folder.glob("*.py"):
        assert not imported(path), path
