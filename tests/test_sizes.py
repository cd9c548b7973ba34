"""The size rules of docs/architecture.md, held: no function in sleuth/ over 80 lines (host
programs included) and no module over 450 (host programs excepted), so a long one is split by
what it does before it is merged, not found by a reader afterwards."""

from __future__ import annotations

import ast
from pathlib import Path

SLEUTH = Path(__file__).resolve().parent.parent / "sleuth"
PROGRAMS = SLEUTH / "hosts" / "program"
MAX_FUNCTION = 80
MAX_MODULE = 450


def _functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function and method in `path`, nested ones too;
    a function's lines run from its `def` (decorators not counted) to its last statement."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_no_function_in_sleuth_is_over_80_lines() -> None:
    modules = sorted(SLEUTH.rglob("*.py"))
    assert PROGRAMS / "secret_scan.py" in modules  # the host programs are held too
    long = [
        f"{path.relative_to(SLEUTH.parent)}:{line} {name} ({count} lines)"
        for path in modules
        for name, line, count in _functions(path)
        if count > MAX_FUNCTION
    ]
    assert long == [], f"functions over {MAX_FUNCTION} lines: split them by what they do"


def test_no_module_in_sleuth_is_over_450_lines() -> None:
    long = [
        f"{path.relative_to(SLEUTH.parent)} ({count} lines)"
        for path in sorted(SLEUTH.rglob("*.py"))
        if PROGRAMS not in path.parents
        and (count := len(path.read_text().splitlines())) > MAX_MODULE
    ]
    assert long == [], f"modules over {MAX_MODULE} lines: split them by what they hold"
