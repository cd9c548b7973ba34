"""Tampering is caught wherever a transcript is read: replay refuses, show banners, verify fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app

runner = CliRunner()
REFERENCE = Path(__file__).resolve().parent.parent / "transcripts" / "mtp-heads.jsonl"


def _tampered(tmp_path: Path) -> tuple[Path, int]:
    """A copy of a reference transcript with one byte of one recorded tool output changed."""
    path = tmp_path / "tampered.jsonl"
    shutil.copyfile(REFERENCE, path)
    lines = path.read_bytes().splitlines(keepends=True)
    number = next(
        i
        for i, line in enumerate(lines, 1)
        if json.loads(line)["type"] == "tool_executed" and b"NextN(" in line
    )
    event = json.loads(lines[number - 1])
    changed = bytearray(lines[number - 1])
    changed[lines[number - 1].index(b"NextN(") + 4] = ord("M")
    lines[number - 1] = bytes(changed)
    path.write_bytes(b"".join(lines))
    assert json.loads(lines[number - 1])["output"] != event["output"]
    return path, number


def test_replay_of_a_changed_output_byte_exits_1_naming_the_line(tmp_path: Path) -> None:
    path, number = _tampered(tmp_path)
    result = runner.invoke(app, ["replay", str(path)])
    assert result.exit_code == 1
    assert f"NOT VERIFIED: line {number}" in result.output
    assert "SAME" not in result.output


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_show_puts_a_not_verified_banner_on_top_in_every_format(tmp_path: Path, fmt: str) -> None:
    path, number = _tampered(tmp_path)
    out = tmp_path / f"story.{fmt}"
    result = runner.invoke(app, ["show", str(path), "--format", fmt, "--output", str(out)])
    assert result.exit_code == 0, result.output
    story = out.read_text(encoding="utf-8")
    banner = story.index(f"NOT VERIFIED: line {number}")
    question = json.loads(REFERENCE.read_text().splitlines()[0])["question"]
    body = max(0, story.find("<body"))  # the page title repeats the question
    assert banner < story.index(question.split(",")[0], body)
    if fmt == "json":
        assert json.loads(story)["verified"] is False


def test_show_in_the_terminal_banners_too(tmp_path: Path) -> None:
    path, number = _tampered(tmp_path)
    result = runner.invoke(app, ["show", str(path)])
    assert result.exit_code == 0
    assert result.output.lstrip().startswith(f"NOT VERIFIED: line {number}")


def test_a_text_file_is_not_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("just some notes about the deployment\n")
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["problems"][0]["line"] == 1
    assert "not a Sleuth transcript" in report["problems"][0]["message"]
    unterminated = tmp_path / "one-line.txt"
    unterminated.write_text("hello")
    assert runner.invoke(app, ["verify", str(unterminated)]).exit_code == 1


def test_json_of_another_kind_is_not_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"seq": 0, "type": "finding"}\n')
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problems"][0]["kind"] == "start"


def test_a_last_line_of_non_json_ending_in_a_newline_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = REFERENCE.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + b"this replaced the last event\n")
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["torn_tail"] is None
    assert (report["problems"][0]["line"], report["problems"][0]["kind"]) == (len(lines), "json")


def test_a_last_line_without_newline_is_a_torn_tail_not_tampering(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = REFERENCE.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 3  # intact up to the torn line, and unsigned: integrity only
    report = json.loads(result.stdout)
    assert report["ok"] and report["verdict"] == "integrity_only"
    assert report["torn_tail"].startswith("torn: the run died")
