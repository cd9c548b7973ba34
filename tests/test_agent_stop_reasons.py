"""Every stop reason, through the real anthropic SDK and the OpenAI-compatible brain, against
the scripted servers on loopback: what runs, what the model is told, how the run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.evidence.lines import shown_conversation
from sleuth.agent.history import CUT_OFF_RESULT, messages_from_events
from sleuth.agent.loop import RunResult
from sleuth.agent.protocols import Brain
from sleuth.agent.session import start_investigation
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ErrorEvent, Event, ModelTurn, SessionEnded, ToolExecuted
from sleuth.transcripts.render import render
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, finding, message, status, text, tool_use
from tests.test_agent_anthropic import ctx, read_config_then_report, workspace

__all__ = ["ctx", "workspace"]
KEY = "sk-ant-test-key-0123456789abcdefghij"
MTP = '"num_nextn_predict_layers": 1'


def anthropic_brain(api: ScriptedAPI, **args: Any) -> AnthropicBrain:
    return AnthropicBrain("claude-haiku-4-5", api_key=KEY, base_url=api.url, **args)


def openai_brain(api: ScriptedAPI, **args: Any) -> OpenAIBrain:
    return OpenAIBrain("served-model", base_url=api.url, api_key="sk-test-openai-0123", **args)


def investigate(
    brain: Brain, ctx: ToolContext, tmp_path: Path, budget: Budget | None = None
) -> tuple[RunResult, list[Event]]:
    settings = Settings(budget=budget or Budget())
    inv = start_investigation("Is MTP declared?", brain, ctx, settings, tmp_path / "t")
    result = inv.run()
    assert verify(Path(result.transcript)).ok
    return result, list(load(Path(result.transcript)).events)


def executed(events: list[Event]) -> list[str]:
    return [e.call_id for e in events if isinstance(e, ToolExecuted)]


def test_a_refusal_ends_refused_with_no_finding_and_runs_nothing(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(
            text("I can't help with that."),
            tool_use("toolu_1", "list_dir", path="."),
            stop_reason="refusal",
        )
    ]
    with ScriptedAPI(script) as api:
        result, events = investigate(anthropic_brain(api), ctx, tmp_path)
    assert result.status == "refused"
    assert result.findings == []
    assert result.answer == "I can't help with that."
    assert executed(events) == []
    assert isinstance(events[-1], SessionEnded) and events[-1].status == "refused"


def test_a_call_cut_off_at_max_tokens_never_runs_and_the_next_turn_has_more_room(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(tool_use("toolu_cut", "list_dir", path="."), stop_reason="max_tokens"),
        *read_config_then_report(),
    ]
    with ScriptedAPI(script) as api:
        result, events = investigate(anthropic_brain(api, max_tokens=1000), ctx, tmp_path)
    assert result.status == "answered"
    assert "toolu_cut" not in executed(events)
    assert executed(events) == ["toolu_1", "toolu_2"]
    limits = [b["max_tokens"] for b in api.bodies()]
    assert limits == [1000, 2000, 1000, 1000]  # raised once, for the turn after the cut
    told = api.bodies()[1]["messages"][-1]["content"][0]
    assert told["tool_use_id"] == "toolu_cut" and told["is_error"] is True
    assert told["content"] == CUT_OFF_RESULT
    cut = [e for e in events if isinstance(e, ErrorEvent) and e.where == "cut_off"]
    assert len(cut) == 1 and "toolu_cut (list_dir)" in cut[0].message
    # Resume rebuilds the same conversation, cut-off answer included.
    sent = api.bodies()[-1]["messages"]
    sent[-1]["content"][-1].pop("cache_control")
    assert shown_conversation(messages_from_events(events))[: len(sent)] == sent


def test_a_raised_limit_stays_within_the_output_budget(ctx: ToolContext, tmp_path: Path) -> None:
    script = [
        message(tool_use("toolu_cut", "list_dir", path="."), stop_reason="max_tokens"),
        message(text("giving up")),
    ]
    budget = Budget(max_output_tokens=1500)
    with ScriptedAPI(script) as api:
        investigate(anthropic_brain(api, max_tokens=1000), ctx, tmp_path, budget)
    assert [b["max_tokens"] for b in api.bodies()] == [1000, 1480]  # 1500 less 20 spent


def test_a_full_context_window_takes_the_final_report_path(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(tool_use("toolu_1", "read_json", path="config.json")),
        message(
            tool_use("toolu_2", "list_dir", path="."), stop_reason="model_context_window_exceeded"
        ),
        message(finding("toolu_3", "One MTP layer is declared.", [("toolu_1", MTP)])),
    ]
    with ScriptedAPI(script) as api:
        result, events = investigate(anthropic_brain(api), ctx, tmp_path)
    assert result.status == "budget_exhausted"
    assert "context window" in result.answer
    assert executed(events) == ["toolu_1", "toolu_3"]
    last = api.bodies()[-1]["messages"][-1]["content"]
    assert last[-1]["text"].startswith("The budget is spent: the conversation fills")
    assert [f.grounded for f in result.findings] == [True]


def test_pause_turn_sends_the_paused_turn_back_and_goes_on(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(text("Still working"), stop_reason="pause_turn"),
        *read_config_then_report(),
    ]
    with ScriptedAPI(script) as api:
        result, _ = investigate(anthropic_brain(api), ctx, tmp_path)
    assert result.status == "answered"
    second = api.bodies()[1]["messages"]
    assert second[-1]["role"] == "assistant"
    assert second[-1]["content"][0]["text"] == "Still working"


def test_a_text_answer_without_a_grounded_finding_is_unsupported(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(tool_use("toolu_1", "read_json", path="config.json")),
        message(
            finding("toolu_2", "MTP is declared.", [("toolu_1", "num_nextn_predict_layers: 9")])
        ),
        message(
            finding("toolu_3", "MTP is declared.", [("toolu_1", "num_nextn_predict_layers: 9")])
        ),
        message(text("Yes, MTP is declared.")),
    ]
    with ScriptedAPI(script) as api:
        result, events = investigate(anthropic_brain(api), ctx, tmp_path)
    assert result.status == "unsupported"
    assert result.answer == "Yes, MTP is declared."
    assert [f.grounded for f in result.findings] == [False]
    assert isinstance(events[-1], SessionEnded) and events[-1].status == "unsupported"
    assert events[-1].summary.endswith(
        "The model's answer, unsupported by evidence (no grounded finding):\nYes, MTP is declared."
    )
    html = render(events, "html")
    assert "unsupported by evidence" in html and "Yes, MTP is declared." in html


def test_a_large_max_tokens_streams_the_messages_api(ctx: ToolContext, tmp_path: Path) -> None:
    with ScriptedAPI(read_config_then_report()) as api:
        brain = anthropic_brain(api, max_tokens=32_000)
        assert brain.needs_streaming(32_000) and not brain.needs_streaming(4096)
        result, events = investigate(brain, ctx, tmp_path)
    assert all(b["stream"] is True for b in api.bodies())
    assert result.status == "answered"
    assert [f.grounded for f in result.findings] == [True]
    first = next(e for e in events if isinstance(e, ModelTurn))
    assert first.response.content[1].input == {"path": "config.json"}
    assert first.usage.output_tokens == 20


def test_thirty_overloads_make_exactly_the_configured_attempts(
    ctx: ToolContext, tmp_path: Path
) -> None:
    with ScriptedAPI([status(529, retry_after="0")] * 30) as api:
        result, events = investigate(anthropic_brain(api), ctx, tmp_path)
    assert len(api.requests) == 3
    assert result.status == "error"
    assert "failed after 3 attempts (HTTP 529): Overloaded" in result.answer
    error = next(e for e in events if isinstance(e, ErrorEvent) and e.where == "brain")
    assert "Overloaded" in error.message


def test_retries_stop_at_the_wall_budget(ctx: ToolContext, tmp_path: Path) -> None:
    with ScriptedAPI([status(529, retry_after="30")] * 5) as api:
        result, _ = investigate(
            anthropic_brain(api, attempts=5), ctx, tmp_path, Budget(max_wall_s=5)
        )
    # A 30 s retry-after would end past the 5 s budget: no second request is made.
    assert len(api.requests) == 1
    assert result.status == "error" and "after 1 attempt " in result.answer


@pytest.mark.parametrize(
    ("finish", "status_"), [("length", "answered"), ("content_filter", "refused")]
)
def test_openai_finish_reasons_length_and_content_filter(
    ctx: ToolContext, tmp_path: Path, finish: str, status_: str
) -> None:
    cut = {"length": "max_tokens", "content_filter": "refusal"}[finish]
    script = [
        message(tool_use("toolu_cut", "list_dir", path="."), stop_reason=cut),
        *read_config_then_report(),
    ]
    with ScriptedAPI(script, flavour="openai") as api:
        result, events = investigate(openai_brain(api, max_tokens=500), ctx, tmp_path)
    assert result.status == status_
    assert "toolu_cut" not in executed(events)
    if finish == "length":
        assert [b["max_tokens"] for b in api.bodies()] == [500, 1000, 500, 500]
        assert api.bodies()[1]["messages"][3]["content"] == CUT_OFF_RESULT
    else:
        assert result.findings == [] and len(api.requests) == 1


def test_a_model_cut_off_every_turn_ends_at_the_turn_budget(
    ctx: ToolContext, tmp_path: Path
) -> None:
    def always_cut(body: Any, index: int) -> Any:
        return message(tool_use(f"toolu_{index}", "list_dir", path="."), stop_reason="max_tokens")

    with ScriptedAPI(always_cut) as api:
        result, events = investigate(anthropic_brain(api), ctx, tmp_path, Budget(max_turns=3))
    # Nothing grounded: no answer, and the budget that ended it is named.
    assert result.status == "unsupported" and "max_turns (3)" in result.answer
    assert result.answer.startswith("no grounded finding before the budget ended the run")
    assert len(api.requests) == 4 and executed(events) == []
