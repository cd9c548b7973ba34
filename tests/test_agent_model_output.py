"""Whatever an OpenAI-compatible model emits, the run stays honest: invalid, missing, non-JSON
or unknown calls go back as precise errors, talk without evidence ends `unsupported`, a model
that repeats itself ends at a budget, and every transcript verifies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.loop import RunResult
from sleuth.agent.session import start_investigation
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ErrorEvent, Event, ToolExecuted
from sleuth.transcripts.recording import MODEL_OUTPUT
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, message, text, tool_use
from tests.test_agent_anthropic import ctx, workspace

__all__ = ["ctx", "workspace"]


def completion(content: str | None, *calls: tuple[str, str, Any]) -> dict[str, Any]:
    """A raw chat completion whose calls' `arguments` are sent exactly as given."""
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for cid, name, args in calls
    ]
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


def run(
    script: Any, ctx: ToolContext, tmp_path: Path, budget: Budget | None = None
) -> tuple[RunResult, list[Event], ScriptedAPI]:
    with ScriptedAPI(script, flavour="openai") as api:
        brain = OpenAIBrain("smollm2", base_url=api.url, tool_choice="required")
        settings = Settings(budget=budget or Budget())
        inv = start_investigation("Is MTP declared?", brain, ctx, settings, tmp_path / "t")
        result = inv.run()
    assert verify(Path(result.transcript)).ok
    return result, list(load(Path(result.transcript)).events), api


def outputs(events: list[Event]) -> dict[str, ToolExecuted]:
    return {e.call_id: e for e in events if isinstance(e, ToolExecuted)}


def test_bad_calls_each_get_a_precise_error_and_the_run_goes_on(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        completion(
            None,
            ("c1", "read_json", json.dumps({"json_data": {"a": 1}})),
            ("c2", "read_json", "{path: config.json"),
            ("c3", "open_file", json.dumps({"path": "config.json"})),
            ("c4", "read_json", "[1, 2]"),
            ("c5", "read_json", {"path": "config.json"}),  # an object, not a string
        ),
        completion("I could not read it."),
    ]
    result, events, api = run(script, ctx, tmp_path)
    seen = outputs(events)
    assert not seen["c1"].result.ok
    assert "invalid input for read_json" in seen["c1"].result.output
    assert (
        "json_data" in seen["c1"].result.output
        and "path: Field required" in seen["c1"].result.output
    )
    assert "not a JSON object: '{path: config.json'" in seen["c2"].result.output
    assert "unknown tool 'open_file'; available:" in seen["c3"].result.output
    assert "not a JSON object: '[1, 2]'" in seen["c4"].result.output
    assert seen["c5"].result.ok and '"num_nextn_predict_layers": 1' in seen["c5"].result.output
    # The transcript carries each failure's kind, so an audit counts bad calls by kind.
    kinds = [seen[c].result.error_kind for c in ("c1", "c2", "c3", "c4", "c5")]
    assert kinds == ["invalid_input"] * 4 + [None]
    # The model gets its own arguments back as it sent them, beside the error.
    sent = api.bodies()[1]["messages"][2]["tool_calls"]
    assert sent[1]["function"]["arguments"] == "{path: config.json"
    assert [m["role"] for m in api.bodies()[1]["messages"][3:]] == ["tool"] * 5
    assert result.status == "unsupported" and result.answer == "I could not read it."


@pytest.mark.parametrize(
    "babble",
    [
        '<tool_call>{"name": "read_json", "arguments": {"path": "config.json"}}</tool_call>',
        '<tool_call>\n{"name": "checkpoint_summary", "arguments": {\n  "target": "exec',  # cut off
        'I will call {"name": "read_json", "arguments": {"path": "config.json"}} now.',
        '<function=read_json>{"path": "config.json"}</function>',
    ],
)
def test_a_pseudo_call_written_in_text_runs_nothing_and_goes_back_to_the_model(
    ctx: ToolContext, tmp_path: Path, babble: str
) -> None:
    # Twice told, then a third pseudo-call ends the run: nothing ran, so nothing grounds.
    script = [completion(babble)] * 3
    result, events, api = run(script, ctx, tmp_path)
    assert result.status == "unsupported" and result.answer == babble
    assert outputs(events) == {}
    notices = [e for e in events if isinstance(e, ErrorEvent) and e.where == MODEL_OUTPUT]
    assert len(notices) == 2 and len(api.requests) == 3
    told = api.bodies()[1]["messages"][-1]
    assert told["role"] == "user" and told["content"] == notices[0].message
    assert notices[0].message.startswith("Nothing was run: your reply wrote a tool call as text")
    name = "checkpoint_summary" if "checkpoint_summary" in babble else "read_json"
    assert name in notices[0].message  # the model sees which of its calls did not run


def test_a_pseudo_call_then_a_real_one_goes_on_and_resume_rebuilds_the_notice(
    ctx: ToolContext, tmp_path: Path
) -> None:
    from sleuth.agent.history import messages_from_events

    babble = '<tool_call>{"name": "read_json", "arguments": {"path": "config.json"}}</tool_call>'
    script = [
        completion(babble),
        completion(None, ("c1", "read_json", json.dumps({"path": "config.json"}))),
        completion("It declares one MTP layer."),
    ]
    result, events, api = run(script, ctx, tmp_path)
    assert outputs(events)["c1"].result.ok
    assert [m["role"] for m in api.bodies()[2]["messages"]] == [
        *("system", "user", "assistant", "user", "assistant", "tool")
    ]
    # A resume rebuilds the conversation with the notice where the run had it.
    rebuilt = messages_from_events(events)
    roles = ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [m["role"] for m in rebuilt] == roles
    assert rebuilt[2]["content"][0]["text"] == api.bodies()[1]["messages"][-1]["content"]
    assert result.status == "unsupported"  # no finding was reported


def test_a_model_repeating_one_call_ends_at_the_budget(ctx: ToolContext, tmp_path: Path) -> None:
    def same(body: Any, index: int) -> Any:
        return message(tool_use(f"c{index}", "list_dir", path="."))

    result, events, api = run(same, ctx, tmp_path, Budget(max_tool_calls=4))
    assert result.status == "unsupported"  # ended by the budget, with nothing grounded
    assert "max_tool_calls (4)" in result.answer
    ran = [e for e in outputs(events).values() if e.result.ok]
    assert len(ran) == 4 and len(api.requests) == 5


def test_babble_without_tools_is_unsupported_and_required_only_on_the_first_turn(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(tool_use("c1", "read_json", path="config.json")),
        message(text("The capital of France is Paris. " * 40)),
    ]
    result, _, api = run(script, ctx, tmp_path)
    assert result.status == "unsupported"
    assert [b["tool_choice"] for b in api.bodies()] == ["required", "auto"]


def test_a_resumed_run_keeps_counting_the_notices_it_already_gave(
    ctx: ToolContext, tmp_path: Path
) -> None:
    from sleuth.agent.replay.resume import resume_investigation

    babble = '<tool_call>{"name": "read_json", "arguments": {"path": "config.json"}}</tool_call>'
    result, events, _ = run(
        [completion(babble), completion(babble), completion("?")], ctx, tmp_path
    )
    path = Path(result.transcript)
    # Killed after the second notice: the last turn and the end were never written.
    lines = path.read_text().splitlines(keepends=True)
    second = [i for i, e in enumerate(events) if isinstance(e, ErrorEvent)][1]
    path.write_text("".join(lines[: second + 1]))
    with ScriptedAPI([completion(babble), completion(babble)], flavour="openai") as api:
        brain = OpenAIBrain("smollm2", base_url=api.url, tool_choice="required")
        resumed = resume_investigation(
            path, ctx, Settings(), brain=brain, trust_unsigned=True
        ).run()
    # Two notices were given before the kill: the third pseudo-call ends the run.
    assert len(api.requests) == 1
    assert resumed.status == "unsupported" and resumed.answer == babble
    assert verify(path).ok
