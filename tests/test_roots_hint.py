"""The "outside the roots" refusal suggests the one root that allows exactly what was asked,
without looking at the host: the same for a path that exists and one that does not, and never
where a symlink inside the roots leads."""

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
def test_a_link_out_is_refused_without_its_target(
    ctx: ToolContext, tmp_path: Path, host: str
) -> None:
    deep = str(tmp_path / "outside" / "deep")
    for tool, path in (("list_dir", "to_deep"), ("read_lines", "to_deep/notes.txt")):
        result = execute(ctx, tool, {"host": host, "path": path})
        error = result.error or ""
        assert not result.ok and "outside the roots" in error and "through a symlink" in error
        assert deep not in error and "outside/deep" not in error, error


@pytest.mark.parametrize("host", ["local", "remote"])
def test_outside_the_roots_an_existing_and_a_missing_path_are_refused_alike(
    ctx: ToolContext, tmp_path: Path, host: str
) -> None:
    outside = tmp_path / "outside"
    missing = str(outside / "nothing")
    assert (
        suggested(ctx, host, "list_dir", missing)
        == f"roots = {[str(tmp_path / 'root'), missing]!r}"
    )
    for tool in ("read_lines", "list_dir", "read_json", "grep"):
        there = str(outside / "deep" / "notes.txt")
        absent = str(outside / "deep" / "absent.txt")
        args = {"pattern": "x"} if tool == "grep" else {}
        said = [
            (execute(ctx, tool, {"host": host, "path": p, **args}).error or "").replace(p, "P")
            for p in (there, absent)
        ]
        assert said[0] == said[1] and "outside the roots" in said[0], said
