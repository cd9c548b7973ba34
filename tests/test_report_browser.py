"""The HTML report in a real browser: headless Chromium (Debian's `chromium` package) renders
it, and the text a reader sees puts the verdicts and summary first, coloured, with no "?"."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser import rendered_dom

from sleuth.transcripts.render.html import render_html
from sleuth.transcripts.render.phrases import Banner
from sleuth.transcripts.store import load

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REFERENCE = Path(__file__).resolve().parent.parent / "transcripts"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")

PROBE = """JSON.stringify({
  text: document.body.innerText,
  badges: [...document.querySelectorAll('.verdicts .verdict')].map(b => ({
    text: b.innerText, colour: getComputedStyle(b).backgroundColor})),
})"""


def rendered(html_file: Path) -> dict[str, Any]:
    """What Chromium shows for `html_file`: the page's visible text and its verdict badges.

    A copy of the page carries one script that writes PROBE's answer into the DOM, and
    Chromium's --dump-dom (which returns once the page has loaded) hands it back: no DevTools
    session to wait on, so nothing can hang past the dump's own timeout."""
    probe = html_file.with_name(html_file.stem + ".probe.html")
    script = f"<script>document.body.setAttribute('data-probe', {PROBE});</script>"
    probe.write_text(html_file.read_text().replace("</body>", script + "</body>"))
    dom = rendered_dom(probe)
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, "Chromium ran the page without its probe"
    return dict(json.loads(html.unescape(found.group(1))))


def test_the_report_leads_with_coloured_verdicts_and_summary_and_has_no_placeholders(
    tmp_path: Path,
) -> None:
    events = load(REFERENCE / "mended-quote.jsonl").events
    page = tmp_path / "report.html"
    page.write_text(render_html(events), encoding="utf-8")
    shown = rendered(page)
    text: str = shown["text"]
    verdicts, summary = text.index("Verdicts"), text.index("Summary")
    claim = "The checkpoint is quantized to NVFP4 with ModelOpt."
    assert verdicts < text.index(claim) < summary < text.index("Turn 1")
    assert "status answered" in text[summary:]
    assert "?" not in text.replace("How is the checkpoint quantized?", "")
    assert "report_finding on" not in text
    (badge,) = shown["badges"]
    assert badge == {"text": "YES", "colour": "rgb(26, 127, 55)"}


def test_an_unverified_report_shows_its_banner_first(tmp_path: Path) -> None:
    events = load(REFERENCE / "mtp-heads.jsonl").events
    page = tmp_path / "report.html"
    banner = Banner("NOT VERIFIED: line 4 (hash): edited", "failed")
    page.write_text(render_html(events, banner), encoding="utf-8")
    text: str = rendered(page)["text"]
    assert text.index("NOT VERIFIED: line 4") < text.index("Verdicts")
