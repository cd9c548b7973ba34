"""`sleuth verify`: every edit, removal or reordering is named by its line number."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.transcripts.verify import verify
from tests.transcript_samples import write_sample

runner = CliRunner()


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_an_untouched_transcript_verifies(tmp_path: Path) -> None:
    report = verify(write_sample(tmp_path))
    assert report.ok and report.problems == [] and report.events == 8 and report.ended


def test_an_edited_byte_is_named_by_its_line(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = _lines(path)
    lines[4] = lines[4].replace(b'"sed"', b'"sad"', 1)
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert not report.ok
    assert [(p.line, p.kind) for p in report.problems] == [(5, "hash")]


def test_an_edit_that_breaks_the_schema_is_named_by_its_line(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = _lines(path)
    lines[6] = lines[6].replace(b'"verdict":"yes"', b'"verdict":"yep"', 1)
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert {(p.line, p.kind) for p in report.problems} == {(7, "schema"), (7, "hash")}


def test_a_line_that_is_no_longer_json_is_named_alone(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = _lines(path)
    lines[1] = b"X" + lines[1][1:]
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert [(p.line, p.kind) for p in report.problems] == [(2, "json")]


def test_a_removed_line_is_named_where_the_gap_is(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = _lines(path)
    del lines[3]
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert not report.ok
    assert {p.line for p in report.problems} == {4}
    assert {p.kind for p in report.problems} == {"seq", "chain"}


def test_two_swapped_lines_are_named(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = _lines(path)
    lines[2], lines[3] = lines[3], lines[2]
    path.write_bytes(b"".join(lines))
    report = verify(path)
    assert not report.ok
    assert report.problems[0].line == 3
    assert {p.line for p in report.problems} == {3, 4, 5}


def test_a_torn_tail_is_a_warning_not_tampering(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 40])
    report = verify(path)
    assert report.ok
    assert report.events == 7
    assert report.torn_tail is not None and "line 8" in report.torn_tail
    assert not report.ended


def test_cli_verify_exits_1_and_names_the_line(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    intact = runner.invoke(app, ["verify", str(path)])
    assert intact.exit_code == 3 and "INTEGRITY ONLY: not signed" in intact.stdout
    lines = _lines(path)
    del lines[5]
    path.write_bytes(b"".join(lines))
    bad = runner.invoke(app, ["verify", str(path)])
    assert bad.exit_code == 1
    assert bad.stdout.startswith("NOT VERIFIED: line 6 (seq)"), "the verdict first"
    as_json = runner.invoke(app, ["verify", "--json", str(path)])
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["ok"] is False and data["problems"][0]["line"] == 6


def test_cli_verify_of_a_missing_file_says_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "cannot read transcript" in result.output
