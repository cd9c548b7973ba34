"""The rooms keep to themselves: arrows run down only (cli/mcp -> agent -> tools -> hosts),
transcripts, errors and config are leaves that know no other room, and telemetry knows only
the transcripts it exports."""

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
    "sleuth.telemetry": ("sleuth.transcripts",),
    "sleuth.hosts": ("sleuth.errors", "sleuth.config"),
    "sleuth.tools": ("sleuth.errors", "sleuth.config", "sleuth.hosts", "sleuth.transcripts"),
    "sleuth.agent": ("sleuth.errors", "sleuth.config", "sleuth.tools", "sleuth.transcripts"),
}


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
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


def runtime_imports(path: Path, modules: set[str], package: Path = PACKAGE) -> set[str]:
    """The `modules` that importing `path` imports: module-level statements only, not those
    inside functions or under `if TYPE_CHECKING` (neither runs at import time)."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path, package).split(".")
    if path.name != "__init__.py":
        here = here[:-1]
    found: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                # `from package import module` imports that module; a name, the package.
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in modules else module)
    return found & modules


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    statements: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            checking = "TYPE_CHECKING" in ast.unparse(node.test)
            statements += _module_level(node.orelse if checking else node.body + node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            statements += _module_level(node.body + handlers + node.orelse + node.finalbody)
        else:
            statements.append(node)
    return statements


def import_graph(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each module of `package` and the modules of `package` it imports as it loads."""
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    return {name: sorted(runtime_imports(p, set(paths), package)) for name, p in paths.items()}


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Circles of module-level imports among the modules of `package` (at least one per knot),
    each as the path from one module back to itself."""
    graph = import_graph(package)
    cycles: list[list[str]] = []
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append([*trail[trail.index(name) :], name])
            return
        if name in done:
            return
        for target in graph[name]:
            walk(target, [*trail, name])
        done.add(name)

    for name in graph:
        walk(name, [])
    return cycles


def test_no_module_of_sleuth_imports_itself_round_a_circle() -> None:
    assert import_cycles() == []
    graph = import_graph()
    # The walk sees real edges: the MCP server and approval both read the shared state.
    assert "sleuth.mcp.state" in graph["sleuth.mcp.server"]
    assert "sleuth.mcp.state" in graph["sleuth.mcp.approval"]
    assert sum(map(len, graph.values())) > 200


def test_the_circle_finder_finds_a_circle_and_skips_type_checking_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def later():\n    from pkg import a\n\nfrom . import c\n")
    (package / "c.py").write_text("from pkg.a import thing\n")
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n"
    )
    (package / "e.py").write_text("import pkg.d\n")
    assert import_cycles(package) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
