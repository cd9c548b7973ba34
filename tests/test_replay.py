"""Replay: a recorded investigation (scripted Messages API, real SDK, test sshd) runs again
offline with identical findings; an edited recording and a changed host are both caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.protocols import BrainReply, Request
from sleuth.agent.replay.recorded import read_recorded
from sleuth.agent.replay.run import replay
from sleuth.agent.session import start_investigation
from sleuth.config import Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ModelResponse, ToolExecuted
from sleuth.transcripts.store import TranscriptWriter, load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use
from tests.test_agent_anthropic import workspace

__all__ = ["workspace"]
REPO = Path(__file__).resolve().parent.parent
NEXTN = "class DeepseekV3ForCausalLMNextN(torch.nn.Module):"
QUESTION = "Does the checkpoint declare MTP heads, and does the source define a NextN class?"


def script(host: str) -> list[Any]:
    return [
        message(
            text("Reading the config and the source."),
            tool_use(
                "toolu_cfg", "read_json", host=host, path="config.json", pointer="/architectures"
            ),
            tool_use("toolu_src", "read_lines", host=host, path="src/model.py"),
            tool_use("toolu_ls", "list_dir", host=host, path="."),
        ),
        message(
            finding("toolu_f1", "The source defines a NextN class.", [("toolu_src", NEXTN)]),
            finding(
                "toolu_f2",
                "The architecture is DeepseekV3ForCausalLM.",
                [("toolu_cfg", "DeepseekV3ForCausalLM")],
            ),
        ),
        message(text("Yes: DeepseekV3ForCausalLMNextN is defined.")),
    ]


def record(ctx: ToolContext, out: Path, host: str = "remote") -> Path:
    with ScriptedAPI(script(host)) as api:
        brain = AnthropicBrain("claude-haiku-4-5", api_key="test-key-replay", base_url=api.url)
        result = start_investigation(QUESTION, brain, ctx, Settings(), out).run()
    assert result.status == "answered" and len(result.findings) == 2
    return Path(result.transcript)


def rewrite(path: Path, out: Path, change: Callable[[Any], Any]) -> Path:
    """A copy of the transcript with `change` applied to each event, re-chained: a valid file
    whose content says something else, not a tampered one."""
    with TranscriptWriter(out, 0, "") as writer:
        for event in load(path).events:
            writer.append(change(event))
    assert verify(out).ok
    return out


@pytest.mark.ssh
def test_an_investigation_over_ssh_replays_offline_with_identical_findings(
    workspace: Path, make_context: Callable[..., ToolContext], tmp_path: Path
) -> None:
    path = record(make_context([str(workspace)]), tmp_path / "t")
    (workspace / "src" / "model.py").unlink()  # offline replay must not touch the host
    result = replay(path)
    assert result.ok, result.divergence
    assert result.status == result.recorded_status == "answered"
    assert result.turns == result.recorded_turns == 3
    assert [f.claim for f in result.findings] == [
        "The source defines a NextN class.",
        "The architecture is DeepseekV3ForCausalLM.",
    ]
    assert result.findings == result.recorded_findings
    assert all(f.grounded for f in result.findings)


@pytest.mark.ssh
def test_an_edited_tool_output_is_reported_at_the_step_that_quotes_it(
    workspace: Path, make_context: Callable[..., ToolContext], tmp_path: Path
) -> None:
    path = record(make_context([str(workspace)]), tmp_path / "t")

    def edit(event: Any) -> Any:
        if isinstance(event, ToolExecuted) and event.call_id == "toolu_src":
            output = event.result.output.replace("NextN", "Plain")
            return event.model_copy(
                update={"result": event.result.model_copy(update={"output": output})}
            )
        return event

    edited = rewrite(path, tmp_path / "edited.jsonl", edit)
    result = replay(edited)
    assert not result.ok
    d = result.divergence
    assert d is not None and d.kind == "report"
    assert (d.step, d.call_id, d.cause_call_id) == (2, "toolu_f1", "toolu_src")
    assert "Recorded; every quote was found" in d.expected and "Not recorded yet" in d.actual
    assert "-Recorded" in d.diff and "+Not recorded yet" in d.diff
    done = sleuth(["replay", str(edited), "--json"], tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["divergence"]["call_id"] == "toolu_f1"
    assert sleuth(["replay", str(path)], tmp_path).returncode == 0


@pytest.mark.ssh
def test_live_replay_reports_the_changed_call_and_the_finding_that_no_longer_holds(
    workspace: Path, make_context: Callable[..., ToolContext], tmp_path: Path
) -> None:
    ctx = make_context([str(workspace)])
    path = record(ctx, tmp_path / "t")
    same = replay(path, live_ctx=ctx)
    assert same.ok and all(c.same for c in same.calls) and len(same.calls) == 3
    (workspace / "src" / "model.py").write_text("import torch\n\nclass Renamed:\n    pass\n")
    result = replay(path, live_ctx=ctx)
    assert result.drifted and not result.ok
    assert [(c.call_id, c.same) for c in result.calls] == [
        ("toolu_cfg", True),
        ("toolu_src", False),
        ("toolu_ls", True),
    ]
    src = result.calls[1]
    assert src.step == 1 and f"-     3\t{NEXTN}" in src.diff
    assert "+     3\tclass Renamed:" in src.diff
    holds = {d.claim: d.holds for d in result.finding_drift}
    assert holds == {
        "The source defines a NextN class.": False,
        "The architecture is DeepseekV3ForCausalLM.": True,
    }


class ScriptedBrain:
    """A deterministic brain standing in for a playbook: same script, one input changed."""

    name, model = "playbook", None

    def __init__(self, turns: list[Any]) -> None:
        self.turns = turns

    def complete(self, request: Request) -> BrainReply:
        turn = self.turns[len(request.messages) // 2]
        return BrainReply(response=ModelResponse.model_validate({"content": turn["content"]}))


def test_a_redriven_brain_that_calls_differently_stops_the_replay_with_the_input_diff(
    workspace: Path, tmp_path: Path
) -> None:
    from sleuth.config import HostConfig
    from sleuth.tools.context import build_context

    settings = Settings(hosts={"local": HostConfig(roots=[str(workspace)])})
    path = record(build_context(settings, []), tmp_path / "t", host="local")
    turns = script("local")
    assert replay(path, brain=ScriptedBrain(turns)).ok
    turns[0]["content"][3]["input"]["path"] = "src"
    result = replay(path, brain=ScriptedBrain(turns))
    d = result.divergence
    assert (
        d is not None
        and d.kind == "calls"
        and (d.step, d.call_id, d.tool) == (1, "toolu_ls", "list_dir")
    )
    assert '-    "path": "."' in d.diff and '+    "path": "src"' in d.diff


def test_a_crashed_recording_replays_up_to_where_it_stopped(
    workspace: Path, tmp_path: Path
) -> None:
    from sleuth.config import HostConfig
    from sleuth.tools.context import build_context

    settings = Settings(hosts={"local": HostConfig(roots=[str(workspace)])})
    path = record(build_context(settings, []), tmp_path / "t", host="local")
    lines = path.read_bytes().splitlines(keepends=True)
    cut = next(
        i for i, line in enumerate(lines) if b'"toolu_f1"' in line and b"tool_executed" in line
    )
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_bytes(b"".join(lines[:cut]) + lines[cut][:40])  # a torn last line
    recording = read_recorded(crashed).recording
    assert recording.status is None and len(recording.turns) == 1
    result = replay(crashed)
    assert result.ok and result.status == "interrupted" and result.findings == []


@pytest.mark.parametrize(
    "path", sorted((REPO / "transcripts").glob("*.jsonl")), ids=lambda p: p.stem
)
def test_reference_transcripts_replay_to_their_recorded_findings(path: Path) -> None:
    assert verify(path).ok
    result = replay(path)
    assert result.ok, result.divergence and result.divergence.describe()
    assert result.findings == result.recorded_findings
    assert result.status == result.recorded_status
    if read_recorded(path).recording.start.brain == "playbook":
        redriven = replay(path, brain=PlaybookBrain())
        assert redriven.ok, redriven.divergence and redriven.divergence.describe()
        assert redriven.findings == redriven.recorded_findings


def test_there_are_reference_transcripts() -> None:
    assert len(list((REPO / "transcripts").glob("*.jsonl"))) >= 3


def sleuth(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from sleuth.cli import main; main()", *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "160", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
