"""The OpenAI-compatible brain through a scripted chat-completions server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.brains.select import select_brain
from sleuth.agent.protocols import BrainError, Request
from sleuth.agent.session import start_investigation
from sleuth.config import Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ModelTurn
from sleuth.transcripts.store import load
from tests.scripted_api import GARBAGE, RESET, ScriptedAPI, message, status, text
from tests.test_agent_anthropic import ctx, read_config_then_report, workspace

__all__ = ["ctx", "workspace"]


def run_openai(
    api: ScriptedAPI, ctx: ToolContext, tmp_path: Path, **brain_args: Any
) -> tuple[Any, list[Any]]:
    brain = OpenAIBrain(
        "served-model", base_url=api.url, api_key="sk-test-openai-0123456789abcdef", **brain_args
    )
    inv = start_investigation("Is MTP declared?", brain, ctx, Settings(), tmp_path / "t")
    result = inv.run()
    return result, list(load(Path(result.transcript)).events)


def test_tool_calls_round_trip_as_function_calls(ctx: ToolContext, tmp_path: Path) -> None:
    with ScriptedAPI(read_config_then_report(), flavour="openai") as api:
        result, _ = run_openai(api, ctx, tmp_path)
    assert result.status == "answered"
    assert [f.grounded for f in result.findings] == [True]
    first, second, third = api.bodies()
    assert api.requests[0].path == "/v1/chat/completions"
    assert api.requests[0].headers["authorization"] == "Bearer sk-test-openai-0123456789abcdef"
    tools = {t["function"]["name"]: t for t in first["tools"]}
    assert tools["read_json"]["type"] == "function"
    assert tools["read_json"]["function"]["parameters"]["properties"]["path"]["type"] == "string"
    assert "report_finding" in tools
    assert first["messages"][0]["role"] == "system"
    assert [m["role"] for m in third["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    call = second["messages"][2]["tool_calls"][0]
    assert call["id"] == "toolu_1" and json.loads(call["function"]["arguments"]) == {
        "path": "config.json"
    }
    assert second["messages"][3]["tool_call_id"] == "toolu_1"
    assert '"num_nextn_predict_layers": 1' in second["messages"][3]["content"]


def test_retries_on_overload_rate_limit_and_reset(ctx: ToolContext, tmp_path: Path) -> None:
    script = [status(529), RESET, status(429, retry_after="1"), message(text("nothing"))]
    with ScriptedAPI(script, flavour="openai") as api:
        result, events = run_openai(api, ctx, tmp_path, attempts=4)
    assert result.status == "unsupported"  # no finding was reported
    turn = next(e for e in events if isinstance(e, ModelTurn))
    assert [r.reason for r in turn.retries] == [
        "HTTP 529",
        "connection error",
        "HTTP 429, retry-after 1",
    ]
    assert turn.retries[2].wait_s >= 0.95


def test_garbage_json_ends_the_run_with_a_clear_error(ctx: ToolContext, tmp_path: Path) -> None:
    with ScriptedAPI([GARBAGE], flavour="openai") as api:
        result, _ = run_openai(api, ctx, tmp_path)
    assert result.status == "error"
    assert "invalid JSON" in result.answer


def test_select_brain_follows_the_flags_and_environment() -> None:
    settings = Settings()
    url = "http://127.0.0.1:1/v1"
    assert select_brain(settings, base_url=url, model="m", env={}).name == "openai"
    assert select_brain(settings, env={"ANTHROPIC_API_KEY": "k"}).name == "anthropic"
    with pytest.raises(BrainError, match="--model is required") as raised:
        select_brain(settings, base_url=url, env={})
    assert raised.value.kind == "usage"
    assert select_brain(settings, env={}).name == "playbook"


def test_the_official_endpoint_gets_max_completion_tokens_and_others_max_tokens() -> None:
    settings = Settings()
    official = select_brain(settings, model="gpt-5", env={"OPENAI_API_KEY": "sk-test-0123456789"})
    served = select_brain(settings, model="m", base_url="http://127.0.0.1:1/v1", env={})
    request = Request("system", [{"role": "user", "content": "q"}], [])
    assert isinstance(official, OpenAIBrain) and isinstance(served, OpenAIBrain)
    assert official.endpoint == "https://api.openai.com/v1"
    assert official.body(request)["max_completion_tokens"] == 4096
    assert "max_tokens" not in official.body(request)
    assert served.body(request)["max_tokens"] == 4096
