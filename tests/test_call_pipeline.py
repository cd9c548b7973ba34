"""One path for every tool call: the loop, `sleuth mcp`, `sleuth tool` and replay all run a call
through `sleuth/agent/calls.py`, and record it the same way; nothing else calls a tool's
function; a session without model turns replays like any other."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import sleuth
from sleuth.agent.protocols import BrainReply, Request
from sleuth.agent.replay.run import replay
from sleuth.agent.session import start_investigation
from sleuth.config import load_settings
from sleuth.tools.approval import approver_for
from sleuth.tools.context import build_context
from sleuth.transcripts.events import ApprovalEvent, Event, ModelResponse, ToolExecuted
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.mcp_support import McpProject

PIPELINE = Path(sleuth.__file__).parent / "agent" / "calls.py"
SERVER_ID = "srv-20261130-120000-abcdef"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_lines", {"host": "local", "path": "notes.txt"}),
    ("stop_server", {"host": "local", "server_id": SERVER_ID}),
]
"""A read and a mutating call a rule approves: validation, consent, execution, redaction and
recording all take part."""


def test_only_the_pipeline_calls_a_tool_function() -> None:
    callers = []
    for path in sorted(PIPELINE.parent.parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "fn"
            ):
                callers.append(f"{path.relative_to(PIPELINE.parent.parent)}:{node.lineno}")
    assert len(callers) == 1 and callers[0].startswith("agent/calls.py:"), callers


class ScriptedBrain:
    """The loop's brain for this test: one turn with the calls, then an answer."""

    name, model = "scripted", None

    def complete(self, request: Request) -> BrainReply:
        if len(request.messages) > 1:
            return BrainReply(response=ModelResponse.model_validate({"content": [_text("Done.")]}))
        blocks = [
            {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(CALLS)
        ]
        return BrainReply(response=ModelResponse.model_validate({"content": blocks}))


def _text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def comparable(events: list[Event]) -> list[dict[str, Any]]:
    """Each call's approval and tool_executed events, less what differs by nature: the
    envelope, the call id and the time a call took."""
    out = []
    for event in events:
        if not isinstance(event, ToolExecuted | ApprovalEvent):
            continue
        raw = event.model_dump(mode="json", exclude={"seq", "ts", "prev", "hash", "call_id"})
        if isinstance(event, ToolExecuted):
            raw["result"].pop("duration_s")
        out.append(raw)
    return sorted(out, key=lambda e: json.dumps(e, sort_keys=True))


@pytest.fixture
def project(tmp_path: Path) -> McpProject:
    made = McpProject.create(tmp_path, allow=["stop_server"])
    toml = made.root / "sleuth.toml"
    toml.write_text(toml.read_text() + '\n[hosts.local.approve]\ntools = ["stop_server"]\n')
    return made


def test_every_caller_records_the_same_events(project: McpProject, tmp_path: Path) -> None:
    recorded: dict[str, list[Event]] = {}

    tool_dir = tmp_path / "tool-transcripts"
    tool_events: list[Event] = []
    for name, args in CALLS:
        pairs = [f"{k}={v}" for k, v in args.items() if k != "host"]
        done = project.cli("tool", name, *pairs, "--transcripts", str(tool_dir))
        assert done.returncode in (0, 1), done.stderr
    for path in sorted(tool_dir.glob("*.jsonl")):
        tool_events += load(path).events
    recorded["sleuth tool"] = tool_events

    async def session() -> None:
        async with project.client("stdio") as client:
            for name, args in CALLS:
                await client.call_tool(name, args)

    anyio.run(session)
    recorded["sleuth mcp"] = project.transcript()

    settings = load_settings(project.root / "sleuth.toml")
    ctx = build_context(settings, [], approver=approver_for("refuse"))
    run = start_investigation("q", ScriptedBrain(), ctx, settings, tmp_path / "loop").run()
    recorded["the loop"] = load(Path(run.transcript)).events

    sources = {"the loop": [Path(run.transcript)], "sleuth tool": sorted(tool_dir.glob("*.jsonl"))}
    for caller, paths in sources.items():
        replayed: list[Event] = []
        for path in paths:
            assert replay(path, events=replayed).ok, path
        recorded[f"replay of {caller}"] = replayed

    want = comparable(recorded["the loop"])
    assert [e["type"] for e in want] == ["approval", "tool_executed", "tool_executed"]
    assert "magic word 42" in json.dumps(want)
    for caller, events in recorded.items():
        assert comparable(events) == want, caller


@pytest.mark.parametrize("live", [False, True], ids=["offline", "live"])
def test_a_sleuth_tool_transcript_replays_its_call(
    project: McpProject, tmp_path: Path, live: bool
) -> None:
    folder = tmp_path / "t"
    done = project.cli("tool", "read_lines", "path=notes.txt", "--transcripts", str(folder))
    assert done.returncode == 0, done.stderr
    [path] = folder.glob("*.jsonl")
    args = ["replay", str(path), "--json", *(["--live"] if live else [])]
    same = project.cli(*args)
    assert same.returncode == 0, same.stdout + same.stderr
    report = json.loads(same.stdout)
    assert report["ok"] and report["divergence"] is None
    if live:
        assert [(c["tool"], c["same"]) for c in report["calls"]] == [("read_lines", True)]
        (project.root / "notes.txt").write_text("line one\nline two\nmagic word 77\n")
        drifted = project.cli(*args)
        assert drifted.returncode == 1
        [call] = json.loads(drifted.stdout)["calls"]
        assert not call["same"] and "magic word 77" in call["diff"]


def test_old_transcripts_with_flat_tool_events_verify_show_and_replay() -> None:
    """The reference transcripts were written before the result was embedded."""
    reference = sorted((Path(__file__).parent.parent / "transcripts").glob("*.jsonl"))
    assert reference
    for path in reference:
        first = next(
            json.loads(line)
            for line in path.read_text().splitlines()
            if json.loads(line)["type"] == "tool_executed"
        )
        assert "result" not in first and "output" in first  # the stored shape is the old one
        assert verify(path).ok
        executed = [e for e in load(path).events if isinstance(e, ToolExecuted)]
        assert executed[0].result.output == first["output"]
        assert replay(path).ok, path
