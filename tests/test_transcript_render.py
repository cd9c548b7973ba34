"""`sleuth show`: the story in four formats, with calls folded and evidence linked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.transcripts.render.html import render_html
from sleuth.transcripts.render.markdown import render_markdown
from sleuth.transcripts.render.text import render_text
from sleuth.transcripts.store import load
from tests.transcript_samples import QUESTION, QUOTE, write_sample

runner = CliRunner()


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return write_sample(tmp_path)


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_every_story_format_tells_question_reasoning_calls_findings_totals(
    transcript: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"story.{fmt}"
    result = runner.invoke(app, ["show", str(transcript), "--format", fmt, "--output", str(out)])
    assert result.exit_code == 0, result.output
    story = out.read_text(encoding="utf-8")
    for needle in (
        QUESTION,
        "I will list the weights index first.",
        "checkpoint_index",
        "read_lines",
        "The checkpoint ships MTP heads",
        "confidence 0.92",
        "grounded",
        "2 tool calls",
        "denied",
        "rate limited once",
    ):
        assert needle in story, f"{fmt} lacks {needle!r}"
    # The verdicts and summary come first, the turns that led to them after.
    assert story.index(QUESTION) < story.index("ships MTP") < story.index("checkpoint_index")
    assert "NOT VERIFIED" not in story


def test_json_format_is_the_events_as_an_array(transcript: Path) -> None:
    result = runner.invoke(app, ["show", str(transcript), "--format", "json"])
    assert result.exit_code == 0
    shown = json.loads(result.stdout)
    assert shown["verified"] is True and shown["verdict"] == "integrity_only"
    assert shown["banner"].startswith("INTEGRITY ONLY: not signed.")
    events = shown["events"]
    assert [e["seq"] for e in events] == list(range(8))
    assert events[0]["question"] == QUESTION


def test_html_is_one_self_contained_file_with_evidence_anchors(transcript: Path) -> None:
    page = render_html(load(transcript).events)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<script" not in page and "<link" not in page and "<style>" in page
    assert 'id="call-toolu_01"' in page and 'href="#call-toolu_01"' in page
    assert 'href="#call-toolu_03"' in page
    assert "<details><summary>output (60 lines)</summary>" in page


def test_long_outputs_are_folded_and_short_ones_shown_whole(transcript: Path) -> None:
    events = load(transcript).events
    text = render_text(events)
    assert "48 more lines folded" in text
    assert "model.layers.59.mtp" not in text
    assert '"num_nextn_predict_layers": 1' in text
    markdown = render_markdown(events)
    assert "<details><summary>output (60 lines)</summary>" in markdown
    assert "[toolu_01 (checkpoint_index on remote)](#call-toolu_01)" in markdown
    assert QUOTE in markdown


def test_show_html_escapes_what_the_model_and_tools_wrote(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    raw = path.read_text().replace("I will list the weights index first.", "<b>bold</b> & co")
    # Rendering does not check the chain; `sleuth verify` does.
    path.write_text(raw)
    page = render_html(load(path).events)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page and "<b>bold</b>" not in page


def test_show_reports_an_unknown_format(transcript: Path) -> None:
    result = runner.invoke(app, ["show", str(transcript), "--format", "pdf"])
    assert result.exit_code == 2
    assert "unknown format" in result.output
