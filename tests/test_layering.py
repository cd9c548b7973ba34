"""The rooms keep to themselves: the agent reaches hosts only through the tool registry."""

from __future__ import annotations

import ast
from pathlib import Path

import sleuth

AGENT = Path(sleuth.__file__).parent / "agent"
HOST_MODULES = ("sleuth.tools.hosts", "sleuth.tools.ssh")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_nothing_in_the_agent_imports_the_host_layer() -> None:
    offenders = {
        f"{path.name}: {name}"
        for path in sorted(AGENT.glob("*.py"))
        for name in imported(path)
        if name.startswith(HOST_MODULES)
    }
    assert offenders == set()
    assert len(list(AGENT.glob("*.py"))) > 5  # the walk found the agent's modules
