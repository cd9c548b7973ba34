"""The "outside the roots" refusal suggests the one root that allows exactly what was asked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.tools.context import ToolContext


@pytest.fixture
def ctx(tmp_path: Path, make_context: Callable[..., ToolContext]) -> ToolContext:
    root = tmp_path / "root"
    (tmp_path / "outside" / "deep").mkdir(parents=True)
    (tmp_path / "outside" / "deep" / "notes.txt").write_text("hello\n")
    root.mkdir()
    (root / "to_deep").symlink_to(tmp_path / "outside" / "deep")
    return make_context([str(root)])


def suggested(ctx: ToolContext, host: str, tool: str, path: str) -> str:
    result = execute(ctx, tool, {"host": host, "path": path})
    assert not result.ok and "outside the roots" in (result.error or "")
    error = result.error or ""
    return error[error.index("roots = ") :].split("` under ")[0]


@pytest.mark.parametrize("host", ["local", "remote"])
def test_a_folder_outside_is_suggested_itself_never_its_parent(
    ctx: ToolContext, tmp_path: Path, host: str
) -> None:
    root = str(tmp_path / "root")
    assert suggested(ctx, host, "list_dir", "/etc") == f"roots = {[root, '/etc']!r}"
    deep = str(tmp_path / "outside" / "deep")
    assert suggested(ctx, host, "list_dir", deep) == f"roots = {[root, deep]!r}"


@pytest.mark.parametrize("host", ["local", "remote"])
def test_a_file_outside_suggests_its_own_folder(
    ctx: ToolContext, tmp_path: Path, host: str
) -> None:
    root = str(tmp_path / "root")
    assert suggested(ctx, host, "read_lines", "/etc/passwd") == f"roots = {[root, '/etc']!r}"
    deep = str(tmp_path / "outside" / "deep")
    notes = f"{deep}/notes.txt"
    assert suggested(ctx, host, "read_lines", notes) == f"roots = {[root, deep]!r}"


@pytest.mark.parametrize("host", ["local", "remote"])
def test_a_link_out_suggests_its_target_and_a_missing_path_itself(
    ctx: ToolContext, tmp_path: Path, host: str
) -> None:
    root = str(tmp_path / "root")
    deep = str(tmp_path / "outside" / "deep")
    assert suggested(ctx, host, "list_dir", "to_deep") == f"roots = {[root, deep]!r}"
    assert suggested(ctx, host, "read_lines", "to_deep/notes.txt") == f"roots = {[root, deep]!r}"
    missing = str(tmp_path / "outside" / "nothing")
    assert suggested(ctx, host, "list_dir", missing) == f"roots = {[root, missing]!r}"
