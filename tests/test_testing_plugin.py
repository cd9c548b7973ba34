"""The pytest plugin, as a user meets it: an inner pytest run records a transcript with
--sleuth-record, replays it without the flag, and fails once the recording no longer holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.transcripts.events import ToolExecuted
from sleuth.transcripts.store import TranscriptWriter, load

pytest_plugins = ["pytester"]

USER_TEST = """
import json
from pathlib import Path

from sleuth.agent.protocols import BrainReply
from sleuth.config import HostConfig, Settings
from sleuth.testing import replay
from sleuth.tools.context import build_context
from sleuth.transcripts.events import ModelResponse

ROOT = Path(__file__).parent / "deploy"
TURNS = [
    [{"type": "tool_use", "id": "c1", "name": "read_json",
      "input": {"host": "local", "path": "config.json", "pointer": "/architectures"}}],
    [{"type": "tool_use", "id": "f1", "name": "report_finding",
      "input": {"claim": "It is a Llama.", "verdict": "yes", "confidence": 0.9,
                "evidence": [{"call_id": "c1", "quote": "LlamaForCausalLM"}]}}],
    [{"type": "text", "text": "A Llama."}],
]


class Scripted:
    name, model = "playbook", None

    def complete(self, request):
        turn = TURNS[len(request.messages) // 2]
        return BrainReply(response=ModelResponse.model_validate({"content": turn}))


def brain():
    Path("brain-built").write_text("yes")
    return Scripted()


def context():
    return build_context(Settings(hosts={"local": HostConfig(roots=[str(ROOT)])}), [])


def test_llama(sleuth_transcript):
    result = sleuth_transcript("llama", "Which architecture?", brain=brain, ctx=context)
    assert [f.claim for f in result.findings] == ["It is a Llama."]
    assert result.findings[0].grounded


def test_helper(sleuth_replay):
    result = sleuth_replay("transcripts/llama.jsonl")
    assert result.findings == result.recorded_findings
"""


@pytest.fixture
def user_project(pytester: pytest.Pytester) -> pytest.Pytester:
    deploy = pytester.path / "deploy"
    deploy.mkdir()
    (deploy / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    pytester.makepyfile(test_user=USER_TEST)
    return pytester


def test_record_then_replay_then_a_changed_recording_fails(user_project: pytest.Pytester) -> None:
    missing = user_project.runpytest("-p", "no:cacheprovider", "-k", "llama")
    missing.assert_outcomes(failed=1)
    assert "run `pytest --sleuth-record` to record it" in missing.stdout.str()

    user_project.runpytest("--sleuth-record").assert_outcomes(passed=2)
    transcript = user_project.path / "transcripts" / "llama.jsonl"
    assert transcript.exists()
    built = user_project.path / "brain-built"
    assert built.exists()
    built.unlink()

    user_project.runpytest().assert_outcomes(passed=2)
    assert not built.exists(), "replaying must not build the brain"

    events = load(transcript).events
    transcript.unlink()
    with TranscriptWriter(transcript, 0, "") as writer:
        for event in events:
            if isinstance(event, ToolExecuted) and event.call_id == "c1":
                changed = event.result.model_copy(update={"output": "MistralForCausalLM"})
                event = event.model_copy(update={"result": changed})
            writer.append(event)
    failed = user_project.runpytest("-k", "llama")
    failed.assert_outcomes(failed=1)
    assert "no longer replays" in failed.stdout.str()
    assert "DIVERGED at step 2, call f1 (report_finding)" in failed.stdout.str()


def test_the_flags_are_documented(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    assert "--sleuth-record" in help_text and "--sleuth-transcripts" in help_text


def test_transcripts_folder_flag_moves_where_transcripts_go(user_project: pytest.Pytester) -> None:
    user_project.runpytest("--sleuth-record", "--sleuth-transcripts", "recorded", "-k", "llama")
    assert (Path(user_project.path) / "recorded" / "llama.jsonl").exists()
