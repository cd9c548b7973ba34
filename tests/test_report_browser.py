"""The HTML report in a real browser: headless Chromium (Debian's `chromium` package) renders
it, and the text a reader sees puts the verdicts and summary first, coloured, with no "?"."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sleuth.transcripts.render import render_html
from sleuth.transcripts.store import load

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REFERENCE = Path(__file__).resolve().parent.parent / "transcripts"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")

PROBE = """JSON.stringify({
  text: document.body.innerText,
  badges: [...document.querySelectorAll('.verdicts .verdict')].map(b => ({
    text: b.innerText, colour: getComputedStyle(b).backgroundColor})),
})"""


async def _evaluate(port: str, page: str) -> dict[str, Any]:
    """Over the DevTools protocol: open `page`, wait for its load, evaluate PROBE."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as listing:
            targets = await listing.json()
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        return await _probe(session, ws_url, page)


async def _probe(session: aiohttp.ClientSession, ws_url: str, page: str) -> dict[str, Any]:
    async with session.ws_connect(ws_url) as ws:
        await ws.send_json({"id": 1, "method": "Page.enable"})
        await ws.send_json({"id": 2, "method": "Page.navigate", "params": {"url": page}})
        async for message in ws:
            data = json.loads(message.data)
            if data.get("method") == "Page.loadEventFired":
                break
        await ws.send_json({"id": 3, "method": "Runtime.evaluate", "params": {"expression": PROBE}})
        async for message in ws:
            data = json.loads(message.data)
            if data.get("id") == 3:
                return dict(json.loads(data["result"]["result"]["value"]))
    raise AssertionError("the browser closed before answering")


def rendered(html_file: Path) -> dict[str, Any]:
    """What Chromium shows for `html_file`: the page's visible text and its verdict badges."""
    with tempfile.TemporaryDirectory() as profile:
        assert CHROMIUM is not None
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.exists() or len(port_file.read_text().split()) < 2:
                assert time.monotonic() < deadline, "Chromium never opened its debugging port"
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            return asyncio.run(_evaluate(port, html_file.as_uri()))
        finally:
            browser.terminate()
            browser.wait(timeout=30)


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
    page.write_text(render_html(events, "NOT VERIFIED: line 4 (hash): edited"), encoding="utf-8")
    text: str = rendered(page)["text"]
    assert text.index("NOT VERIFIED: line 4") < text.index("Verdicts")
