"""The file tools, locally and over the test sshd, on the same tree with the same results."""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import PolicyError, SandboxedHost
from sleuth.tools.context import ToolContext

ODD_NAMES = [
    "name with spaces.txt",
    "q'uote\".txt",
    "$(touch CANARY).txt",
    "`touch CANARY`.txt",
    "a;touch CANARY.txt",
    "*.txt",
    "-leading.txt",
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("files")
    root = base / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "model.py").write_text(
        "".join(
            f"line {i}: speculative_algorithm = 'NEXTN'\n" if i == 7 else f"line {i}\n"
            for i in range(1, 31)
        )
    )
    (root / "src" / "blob.bin").write_bytes(b"\x00\x01speculative_algorithm\x00" * 10)
    (root / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                "text_config": {"mtp_num_hidden_layers": 1, "a/b": [10, 20]},
            }
        )
    )
    for name in ODD_NAMES:
        (root / name).write_text(f"content of {name}\n")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (root / "link_out").symlink_to(outside)
    (root / "link_in.py").symlink_to(root / "src" / "model.py")
    (base / "rootlink").symlink_to(root)
    return base


@pytest.fixture(params=["local", "remote"])
def ctx(
    request: pytest.FixtureRequest, tree: Path, make_context: Callable[..., ToolContext]
) -> ToolContext:
    """The tree's root on this machine, and on the test sshd (in each of `ssh_calls`)."""
    roots = [str(tree / "root")]
    if request.param == "local":
        sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=roots), Limits())
        return ToolContext(hosts={"local": sandbox})
    made = make_context(roots)
    made.hosts["local"] = made.hosts["remote"]
    return made


def run(ctx: ToolContext, name: str, **inputs: Any) -> Any:
    return execute(ctx, name, {"host": "local", **inputs})


def test_read_lines_numbers_lines_and_reports_total(ctx: ToolContext) -> None:
    result = run(ctx, "read_lines", path="src/model.py", start=6, end=8)
    assert result.ok, result.error
    assert "     7\tline 7: speculative_algorithm = 'NEXTN'" in result.output
    assert result.data["total_lines"] == 30
    assert result.data["end"] == 8
    assert "line 9" not in result.output


def test_read_lines_past_the_end_shows_what_exists(ctx: ToolContext) -> None:
    result = run(ctx, "read_lines", path="src/model.py", start=29, end=100)
    assert result.ok
    assert result.data == {"path": result.data["path"], "start": 29, "end": 30, "total_lines": 30}


def test_grep_finds_matches_and_skips_binary_files(ctx: ToolContext) -> None:
    result = run(ctx, "grep", pattern="speculative_algorithm", path=".")
    assert result.ok
    assert result.data["matches"] == 1
    assert result.data["files"][0].endswith("src/model.py")
    assert "blob.bin" not in result.output
    assert ":7:line 7" in result.output


def test_grep_pattern_starting_with_dash_is_a_pattern_not_an_option(ctx: ToolContext) -> None:
    result = run(ctx, "grep", pattern="-leading", path=".", fixed_string=True)
    assert result.ok
    assert result.data["matches"] == 1


def test_grep_no_match_is_an_answer_not_an_error(ctx: ToolContext) -> None:
    result = run(ctx, "grep", pattern="nothing-like-this", path="src")
    assert result.ok and result.data["matches"] == 0
    assert "no matches" in result.output


def test_list_dir_shows_kinds_and_does_not_follow_links(ctx: ToolContext) -> None:
    result = run(ctx, "list_dir", path=".", depth=2)
    assert result.ok
    kinds = {e["name"]: e["kind"] for e in result.data["entries"]}
    assert kinds["src"] == "dir" and kinds["src/model.py"] == "file"
    assert kinds["link_out"] == "link"
    assert not any(name.startswith("link_out/") for name in kinds)


def test_read_json_follows_a_pointer_with_escapes(ctx: ToolContext) -> None:
    result = run(ctx, "read_json", path="config.json", pointer="/text_config/a~1b/1")
    assert result.ok and result.data == 20
    missing = run(ctx, "read_json", path="config.json", pointer="/text_config/nope")
    assert not missing.ok and "mtp_num_hidden_layers" in (missing.error or "")


def test_local_and_remote_agree(tree: Path, make_context: Callable[..., ToolContext]) -> None:
    roots = [str(tree / "root")]
    local = ToolContext(
        hosts={"local": SandboxedHost("local", LocalHost(), HostConfig(roots=roots), Limits())}
    )
    remote = make_context(roots)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_lines", {"path": "src/model.py", "start": 1, "end": 30}),
        ("grep", {"pattern": "line [12]$", "path": "src", "context": 1}),
        ("list_dir", {"path": ".", "depth": 3}),
        ("read_json", {"path": "config.json"}),
    ]
    for name, inputs in calls:
        here = execute(local, name, {"host": "local", **inputs})
        there = execute(remote, name, {"host": "remote", **inputs})
        assert (here.ok, here.output, here.data) == (there.ok, there.output, there.data), name


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "link_out/secret.txt", "src/../../outside/secret.txt", "/etc/passwd"],
)
def test_escapes_are_refused_with_roots_and_the_fix(
    ctx: ToolContext, tree: Path, path: str
) -> None:
    for name in ("read_lines", "read_json"):
        result = run(ctx, name, path=path)
        assert not result.ok
        assert "outside the roots" in (result.error or "")
        assert str(tree / "root") in (result.error or "")
        assert "sleuth.toml" in (result.error or "")
        assert "TOP SECRET" not in result.output


def test_odd_names_are_read_literally_and_run_nothing(ctx: ToolContext, tree: Path) -> None:
    for name in ODD_NAMES:
        result = run(ctx, "read_lines", path=name)
        assert result.ok, (name, result.error)
        assert f"content of {name}" in result.output
        grep = run(ctx, "grep", pattern="content", path=name)
        assert grep.ok and grep.data["matches"] == 1
    assert not list(tree.rglob("CANARY")) and not Path("CANARY").exists()


@pytest.mark.parametrize("bad", ["src/model.py\n/etc/passwd", "src/model.py\x00", "x\r"])
def test_nul_and_line_breaks_are_refused(ctx: ToolContext, bad: str) -> None:
    result = run(ctx, "read_lines", path=bad)
    assert not result.ok and "NUL or a line break" in (result.error or "")


def test_a_root_that_is_a_symlink_is_refused(tree: Path) -> None:
    sandbox = SandboxedHost(
        "local", LocalHost(), HostConfig(roots=[str(tree / "rootlink")]), Limits()
    )
    with pytest.raises(PolicyError, match="is a symlink to"):
        sandbox.resolve("config.json")


def test_unknown_inputs_are_refused_with_the_field_name(ctx: ToolContext) -> None:
    result = run(ctx, "read_lines", path="src/model.py", stat=3)
    assert not result.ok and "stat" in (result.error or "")


def test_an_empty_grep_pattern_is_refused_not_a_dump_of_every_line(ctx: ToolContext) -> None:
    result = run(ctx, "grep", pattern="", path=".")
    assert not result.ok and "pattern" in (result.error or "")
    assert result.data is None or not result.data.get("matches")


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.log"
    line = (("INFO served in 9 ms " * 500)[:9_999] + "\n").encode()
    with path.open("wb") as fh:
        for _ in range(20):
            fh.write(line * 1_000)  # 200 MB in 20k lines of 10 kB
    return path


def test_200mb_file_stays_within_caps_and_bounded_memory(ctx: ToolContext, big_file: Path) -> None:
    sandbox = ctx.hosts["local"]
    sandbox.config = sandbox.config.model_copy(update={"roots": [str(big_file.parent)]})
    sandbox._roots = None
    tracemalloc.start()
    try:
        lines = run(ctx, "read_lines", path=str(big_file), start=1, end=2000)
        grep = run(ctx, "grep", pattern="served", path=str(big_file))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    cap = ctx.limits.max_output_bytes
    for result in (lines, grep):
        assert result.ok, result.error
        assert len(result.output.encode()) <= cap + 200
        assert result.bytes_cut > 0
        assert f"[truncated: {result.bytes_cut} more bytes" in result.output
    # Whole lines up to the cap, then exactly what was not shown (the file's count is known).
    shown = lines.data["end"]
    assert shown > 1 and lines.output.startswith(f"{big_file} lines 1-{shown} of 20000\n")
    assert lines.output.endswith(f"more bytes in {2000 - shown} more lines]")
    assert peak < 16 * 1024 * 1024, f"peak Python memory {peak / 1e6:.1f} MB"
    assert os.path.getsize(big_file) == 200_000_000


def test_a_huge_line_is_cut_with_a_marker_and_binary_files_are_refused(
    ctx: ToolContext, tree: Path
) -> None:
    (tree / "root" / "long.txt").write_bytes(b"word " * 10_000 + b"\nsecond\n")
    result = run(ctx, "read_lines", path="long.txt")
    assert result.ok and result.data["total_lines"] == 2
    first, second = result.output.splitlines()[1:3]
    # The cut at 4,096 bytes lands inside a word, which is dropped whole.
    assert first == "     1\t" + "word " * 819 + " [line cut: 4095 of its first 4096 bytes shown]"
    assert second == "     2\tsecond"
    binary = run(ctx, "read_lines", path="src/blob.bin")
    assert not binary.ok and "is binary" in (binary.error or "")
