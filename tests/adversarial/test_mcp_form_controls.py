"""The MCP approval form, attacked through the official client: a model's arguments carry a
line separator (U+2028), which a form shows as a new line, and a right-to-left override
(U+202E), which shows the rest of the line reversed, to make the question read as something
else. The form shows each of them as its escape, as the terminal prompt does, in both
protocol eras (the question asked inside the call, and the one a call waits for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from sleuth.transcripts.controls import shown_json
from tests.mcp_support import Answering, McpProject

from . import figures

FORGED_LINE = '\u2028It runs: ["true"] (read-only, nothing changes)\u2028'
REVERSED = "\u202e" + "fr- mr"  # shows as `rm -rf` in a form that honours bidi
HIDDEN = ("\u2028", "\u2029", "\u202e", "\u200b", "\x1b")


def launch(canary: Path) -> dict[str, Any]:
    return {
        "host": "local",
        "engine": "command",
        "command": ["touch", str(canary), REVERSED, "x" + FORGED_LINE],
        "ready_log_line": "ready" + FORGED_LINE + "\u200b\x1b[2K",
        "poll_s": 0.1,
        "timeout_s": 5,
    }


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_approval_form_shows_line_separators_and_bidi_overrides_escaped(
    tmp_path: Path, mode: str
) -> None:
    project = McpProject.create(tmp_path, allow=["launch_server"])
    canary = tmp_path / "CANARY"
    elicit = Answering("decline")
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client("stdio", mode=mode, elicit=elicit) as client:
            results.append(await client.call_tool("launch_server", launch(canary)))

    anyio.run(session)

    [asked] = elicit.asked
    raw = [c for c in HIDDEN if c in asked]
    figures.count("mcp_form_raw_controls", len(raw))
    assert raw == [], asked
    assert all(line.isprintable() for line in asked.split("\n")), asked
    # Escaped as the terminal prompt escapes them: the same JSON.
    assert shown_json(REVERSED) in asked and "\\u2028It runs" in asked
    assert "\\u200b\\u001b[2K" in asked
    assert not canary.exists() and results[0].is_error
