"""An MCP session's transcript under `sleuth verify`, `show` and `replay` (offline and --live)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from sleuth.agent.replay.run import replay
from tests.mcp_support import McpProject, call_id_of


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[McpProject, Path]:
    """A session that read notes.txt and reported one grounded and one ungrounded finding."""
    project = McpProject.create(tmp_path)

    async def session() -> None:
        async with project.client("stdio") as client:
            read = await client.call_tool("read_lines", {"host": "local", "path": "notes.txt"})
            await client.call_tool("list_dir", {"host": "local", "path": "."})
            for quote in ("magic word 42", "not in the file"):
                await client.call_tool(
                    "report_finding",
                    {
                        "claim": f"notes.txt says {quote}",
                        "verdict": "yes",
                        "confidence": 0.8,
                        "evidence": [{"call_id": call_id_of(read), "quote": quote}],
                    },
                )

    anyio.run(session)
    [path] = project.transcript_paths()
    return project, path


def test_offline_replay_regrounds_the_recorded_calls_and_gets_the_same_findings(
    recorded: tuple[McpProject, Path],
) -> None:
    project, path = recorded
    result = replay(path)
    assert result.ok and result.divergence is None
    assert [f.grounded for f in result.findings] == [True, False]
    assert result.findings == result.recorded_findings

    shown = project.cli("replay", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "SAME" in shown.stdout


def test_an_edited_mcp_transcript_fails_verify_at_the_edited_line(
    recorded: tuple[McpProject, Path],
) -> None:
    project, path = recorded
    assert project.cli("verify", str(path)).returncode == 3  # intact, unsigned
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace("magic word 42", "magic word 43")
    path.write_text("\n".join(lines) + "\n")
    verified = project.cli("verify", str(path))
    assert verified.returncode == 1 and verified.stdout.startswith("NOT VERIFIED: line 2 (hash)")


def test_live_replay_reports_the_changed_file_and_the_finding_that_no_longer_holds(
    recorded: tuple[McpProject, Path],
) -> None:
    project, path = recorded
    same = project.cli("replay", str(path), "--live", "--json")
    assert same.returncode == 0, same.stdout + same.stderr
    (project.root / "notes.txt").write_text(
        "line one\nline two\nmagic word 77\n"
    )  # same size: list_dir stays the same
    drifted = project.cli("replay", str(path), "--live", "--json")
    assert drifted.returncode == 1
    report = json.loads(drifted.stdout)
    assert report["mode"] == "live" and report["drifted"]
    changed = [c for c in report["calls"] if not c["same"]]
    assert [c["tool"] for c in changed] == ["read_lines"]
    assert "magic word 77" in changed[0]["diff"]
    holds = {d["claim"]: d["holds"] for d in report["finding_drift"] if d["was_grounded"]}
    assert holds == {"notes.txt says magic word 42": False}


def test_show_renders_an_mcp_session(recorded: tuple[McpProject, Path]) -> None:
    project, path = recorded
    for fmt in ("md", "json"):
        shown = project.cli("show", str(path), "--format", fmt)
        assert shown.returncode == 0, shown.stderr
        assert "magic word 42" in shown.stdout
    assert os.path.getsize(path) > 0
