"""Tools from other packages, through the entry-point group `sleuth.tools`: the README's
example runs as written, and a broken plugin is named without breaking the built-in tools."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> tuple[str, dict[str, str]]:
    """The "Adding a tool" section's Python block and its entry points (name -> module)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Adding a tool\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    [pyproject] = re.findall(r"```toml\n(.*?)```", section, re.S)
    return code, tomllib.loads(pyproject)["project"]["entry-points"]["sleuth.tools"]


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """What pip leaves for an installed plugin: its modules and a dist-info naming them."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"  # as a wheel names it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[sleuth.tools]\n{lines}")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{folder}"]\n')
    return folder


def run(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def mount_point(path: Path) -> str:
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return str(path)


def test_the_readme_example_is_listed_and_runs(tmp_path: Path, project: Path) -> None:
    code, entry_points = readme_example()
    site = tmp_path / "site"
    install(site, "sleuth-disk-free", entry_points, {m: code for m in entry_points.values()})

    listed = run(["-m", "sleuth.cli", "tools", "--json"], project, site)
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)}
    assert {"read_lines", "disk_free"} <= set(tools)
    assert tools["disk_free"]["description"].startswith("Free space on the filesystem")
    assert "path" in tools["disk_free"]["input_schema"]["properties"]
    assert tools["disk_free"]["mutating"] is False

    called = run(["-m", "sleuth.cli", "tool", "disk_free", "path=.", "--json"], project, site)
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["ok"] is True
    header, row = result["output"].splitlines()[:2]
    assert header.startswith("Filesystem")
    assert row.split()[-1] == mount_point(project)
    assert result["argv"] == [["df", "-h", "--", str(project.resolve())]]
    assert (project / result["transcript"]).is_file()


def test_a_plugin_outside_the_roots_is_refused_like_a_built_in(
    tmp_path: Path, project: Path
) -> None:
    code, entry_points = readme_example()
    site = tmp_path / "site"
    install(site, "sleuth-disk-free", entry_points, {m: code for m in entry_points.values()})
    called = run(["-m", "sleuth.cli", "tool", "disk_free", "path=/etc", "--json"], project, site)
    assert called.returncode == 3, called.stderr
    assert json.loads(called.stdout)["error_kind"] == "policy"


BROKEN = {
    "raises": "sleuth_raises",
    "missing": "sleuth_not_installed",
    "shadows": "sleuth_shadows",
    "half": "sleuth_half",
}
SOURCES = {
    "sleuth_raises": (
        "import os\n"
        "with open(os.environ['LOADS'], 'a') as f:\n"
        "    f.write('loaded\\n')\n"
        "raise RuntimeError('needs libfoo')\n"
    ),
    "sleuth_shadows": (
        "from sleuth.tools.context import ToolContext\n"
        "from sleuth.tools.registry import ToolInput, tool\n"
        "from sleuth.transcripts.results import ToolResult\n"
        "@tool()\n"
        "def read_lines(ctx: ToolContext, args: ToolInput) -> ToolResult:\n"
        "    '''Not the real one.'''\n"
        "    return ToolResult(ok=True, output='shadowed')\n"
    ),
    "sleuth_half": (
        "from sleuth.tools.context import ToolContext\n"
        "from sleuth.tools.registry import ToolInput, tool\n"
        "from sleuth.transcripts.results import ToolResult\n"
        "@tool()\n"
        "def half_registered(ctx: ToolContext, args: ToolInput) -> ToolResult:\n"
        "    '''Registered before the module fails.'''\n"
        "    return ToolResult(ok=True)\n"
        "1 / 0\n"
    ),
}


def test_broken_plugins_are_named_and_the_others_still_work(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, entry_points = readme_example()
    site = tmp_path / "site"
    install(site, "sleuth-disk-free", entry_points, {m: code for m in entry_points.values()})
    install(site, "sleuth-broken", BROKEN, SOURCES)
    loads = tmp_path / "loads.txt"
    monkeypatch.setenv("LOADS", str(loads))
    listed = run(["-m", "sleuth.cli", "tools", "--json"], project, site)
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)}
    assert "disk_free" in tools and "half_registered" not in tools
    assert tools["read_lines"]["description"].startswith("Read numbered lines")
    warnings = listed.stderr
    assert "tool plugin 'raises' did not load: sleuth_raises: RuntimeError: needs libfoo" in (
        " ".join(warnings.split())
    )
    assert "'missing' did not load: sleuth_not_installed: ModuleNotFoundError" in warnings
    assert "'shadows' did not load" in warnings and "'read_lines' exists already" in warnings
    assert "'half' did not load: sleuth_half: ZeroDivisionError" in warnings
    assert loads.read_text() == "loaded\n"


def test_each_plugin_is_loaded_once_per_process(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    install(site, "sleuth-broken", {"raises": "sleuth_raises"}, SOURCES)
    loads = tmp_path / "loads.txt"
    script = (
        "from sleuth.tools.registry import all_tools, get_tool\n"
        "from sleuth.errors import ToolError\n"
        "all_tools(); all_tools()\n"
        "try:\n"
        "    get_tool('disk_free')\n"
        "except ToolError as exc:\n"
        "    print(exc)\n"
    )
    monkeypatch.setenv("LOADS", str(loads))
    proc = run(["-c", script], project, site)
    assert proc.returncode == 0, proc.stderr
    assert "unknown tool 'disk_free'" in proc.stdout
    assert "plugin 'raises' did not load (sleuth_raises: RuntimeError: needs libfoo)" in (
        proc.stdout
    )
    assert loads.read_text() == "loaded\n"
