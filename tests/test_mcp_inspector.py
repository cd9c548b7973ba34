"""A client no one here wrote: the MCP Inspector's CLI lists and calls tools of `sleuth mcp`.

The Inspector is installed into tests/mcp_inspector/ by .ci/run (`npm install --prefix
tests/mcp_inspector`). Locally the test skips with that command when it is missing; under CI
a missing Inspector fails, so a broken install step cannot pass as a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_support import SECRET, McpProject

INSPECTOR = Path(__file__).parent / "mcp_inspector" / "node_modules" / ".bin" / "mcp-inspector"
INSTALL = "npm install --prefix tests/mcp_inspector"


@pytest.fixture
def inspector() -> Path:
    if not INSPECTOR.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{INSPECTOR} is missing; .ci/run installs it with `{INSTALL}`")
        pytest.skip(f"the MCP Inspector is not installed; install it with `{INSTALL}`")
    return INSPECTOR


def inspect(
    inspector: Path, project: McpProject, target: list[str], *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**project.env(), "MCP_CATALOG_PATH": str(project.root.parent / "catalog.json")}
    return subprocess.run(
        [str(inspector), "--cli", *target, *args],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def stdio_target(project: McpProject) -> list[str]:
    return project.argv()


def call(inspector: Path, project: McpProject, target: list[str], path: str) -> Any:
    done = inspect(
        inspector,
        project,
        target,
        "--method",
        "tools/call",
        "--tool-name",
        "read_lines",
        "--tool-arg",
        "host=local",
        f"path={path}",
    )
    # An isError result is printed, then the Inspector's own error line: the first is ours.
    first, _ = json.JSONDecoder().raw_decode(done.stdout.strip())
    return first


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_inspector_lists_and_calls_sleuth_tools(
    inspector: Path, tmp_path: Path, transport: str
) -> None:
    project = McpProject.create(tmp_path)
    if transport == "stdio":
        results = run_all(inspector, project, stdio_target(project))
    else:
        with project.http_server() as served:
            auth = ["--header", f"Authorization: Bearer {served.token}"]
            results = run_all(inspector, project, [served.url, "--transport", "http", *auth])
    listed, inside, outside = results
    names = {t["name"] for t in listed["tools"]}
    assert {"read_lines", "grep", "launch_server", "report_finding"} <= names
    read_lines = next(t for t in listed["tools"] if t["name"] == "read_lines")
    assert "path" in read_lines["inputSchema"]["properties"]
    assert inside["isError"] is False and "magic word 42" in inside["content"][0]["text"]
    assert inside["structuredContent"]["total_lines"] == 3
    assert outside["isError"] is True and "outside the roots" in outside["content"][0]["text"]
    assert SECRET not in json.dumps(outside)


def run_all(inspector: Path, project: McpProject, target: list[str]) -> list[Any]:
    listed = inspect(inspector, project, target, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    return [
        json.loads(listed.stdout),
        call(inspector, project, target, "notes.txt"),
        call(inspector, project, target, str(project.outside)),
    ]
