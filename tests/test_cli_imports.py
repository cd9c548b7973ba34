"""A command imports what it uses: `sleuth --version` and a `sleuth tool` read on the local
host load none of the heavy rooms (the MCP SDK and its web stack, model SDKs, the benchmark
client, SSH), as `python -X importtime` reports them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from sleuth.cli import COMMANDS, app

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "mcp",
    "anthropic",
    "openai",
    "aiohttp",
    "uvicorn",
    "paramiko",
    "opentelemetry",
    "starlette",
)


def imported_by(python_args: list[str], cwd: Path) -> tuple[set[str], str]:
    """The modules a fresh interpreter imports for these arguments, and what it printed."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *python_args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = re.findall(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", proc.stderr, re.M)
    return set(log), proc.stdout


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_version_imports_no_heavy_room(tmp_path: Path) -> None:
    modules, out = imported_by(["-m", "sleuth.cli", "--version"], tmp_path)
    assert out.startswith("sleuth ")
    assert "sleuth.cli" in modules
    assert heavy(modules) == []
    # No command's module either: each is imported when its command runs. (importtime does
    # not log a module that `importlib.import_module` loads, only what that module imports;
    # every command module imports sleuth.cli.common.)
    assert "sleuth.cli.common" not in modules


def test_local_tool_read_imports_no_heavy_room(tmp_path: Path) -> None:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    args = ["-m", "sleuth.cli", "tool", "read_lines", "path=README.md", "end=3"]
    modules, out = imported_by(args, tmp_path)
    assert "# Sleuth" in out
    assert {"sleuth.cli.common", "sleuth.tools.registry"} <= modules
    assert heavy(modules) == []


def test_the_check_sees_a_heavy_room_when_one_is_imported(tmp_path: Path) -> None:
    modules, _ = imported_by(["-c", "import sleuth.mcp.server"], tmp_path)
    assert {"mcp", "starlette", "opentelemetry"} <= {m.split(".")[0] for m in heavy(modules)}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_is_built_from_its_entry_under_its_own_name(name: str) -> None:
    group = typer.main.get_command(app)
    with group.make_context("sleuth", [name, "--help"], resilient_parsing=True) as ctx:
        command = group.get_command(ctx, name)
    module = COMMANDS[name].partition(":")[0]
    assert command is not None and command.name == name
    assert command.callback is None or command.callback.__module__ == module
    assert command.help
