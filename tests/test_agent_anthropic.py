"""The loop with the real anthropic SDK against a scripted Messages-API server on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.evidence.lines import shown_conversation
from sleuth.agent.history import messages_from_events
from sleuth.agent.loop import RunResult
from sleuth.agent.session import start_investigation
from sleuth.config import Budget, HostConfig, Settings
from sleuth.tools import registry
from sleuth.tools.context import ToolContext, build_context
from sleuth.tools.registry import ToolInput, tool
from sleuth.transcripts.events import Event, ModelTurn, ToolExecuted
from sleuth.transcripts.redact import clear_registered_secrets
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import load
from tests.scripted_api import RESET, ScriptedAPI, finding, message, status, text, tool_use

CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "deploy"
    (root / "src").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (root / "src" / "model.py").write_text(
        "import torch\n\nclass DeepseekV3ForCausalLMNextN(torch.nn.Module):\n    pass\n"
    )
    return root


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    settings = Settings(hosts={"local": HostConfig(roots=[str(workspace)])})
    return build_context(settings, [])


class SleepyInput(ToolInput):
    label: str


@pytest.fixture
def sleepy() -> Iterator[list[tuple[float, float]]]:
    """A test-only tool that sleeps 0.5 s and logs when it ran; unregistered afterwards."""
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    @tool()
    def sleepy(ctx: ToolContext, args: SleepyInput) -> ToolResult:
        """Sleep half a second."""
        start = time.monotonic()
        time.sleep(0.5)
        with lock:
            spans.append((start, time.monotonic()))
        return ToolResult(ok=True, output=f"slept {args.label}")

    yield spans
    registry._TOOLS.pop("sleepy", None)


def run(
    api: ScriptedAPI,
    ctx: ToolContext,
    tmp_path: Path,
    budget: Budget | None = None,
    **brain_args: Any,
) -> tuple[RunResult, list[Event]]:
    brain = AnthropicBrain(
        "claude-haiku-4-5",
        api_key="sk-ant-test-key-0123456789abcdefghij",
        base_url=api.url,
        **brain_args,
    )
    settings = Settings(budget=budget or Budget())
    inv = start_investigation(
        "Does the checkpoint declare MTP heads?", brain, ctx, settings, tmp_path / "transcripts"
    )
    result = inv.run()
    return result, load(Path(result.transcript)).events


def read_config_then_report() -> list[Any]:
    return [
        message(text("Reading the config."), tool_use("toolu_1", "read_json", path="config.json")),
        message(
            finding(
                "toolu_2",
                "The config declares one MTP layer.",
                [("toolu_1", '"num_nextn_predict_layers": 1')],
            )
        ),
        message(text("Yes: one MTP (NextN) layer is declared.")),
    ]


def test_requests_declare_tools_cache_breakpoints_and_results_in_order(
    ctx: ToolContext, tmp_path: Path
) -> None:
    with ScriptedAPI(read_config_then_report()) as api:
        result, events = run(api, ctx, tmp_path)
    assert result.status == "answered"
    first, second, third = api.bodies()

    tools = {t["name"]: t for t in first["tools"]}
    assert {"read_json", "read_lines", "grep", "list_dir", "report_finding"} <= set(tools)
    schema = tools["read_json"]["input_schema"]
    assert schema["properties"]["path"]["type"] == "string"
    assert schema["additionalProperties"] is False
    assert set(tools["report_finding"]["input_schema"]["required"]) >= {
        "claim",
        "verdict",
        "confidence",
        "evidence",
    }
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in first["tools"][:-1])
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "report_finding" in first["system"][0]["text"]

    # The tail breakpoint moves: on turn 2 it sits on the tool result, not on the question.
    assert first["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in second["messages"][0]["content"][-1]
    assert second["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    breakpoints = json.dumps(third).count('"cache_control"')
    assert breakpoints == 3

    roles = [m["role"] for m in third["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    tool_result = second["messages"][2]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == "toolu_1"
    assert tool_result["is_error"] is False
    assert '"num_nextn_predict_layers": 1' in tool_result["content"]
    assert third["messages"][3]["content"][0]["id"] == "toolu_2"

    assert [f.grounded for f in result.findings] == [True]
    assert result.answer == "Yes: one MTP (NextN) layer is declared."
    assert [e.type for e in events] == [
        "session_started",
        "model_turn",
        "tool_executed",
        "model_turn",
        "tool_executed",
        "finding",
        "model_turn",
        "session_ended",
    ]
    assert events[-1].totals.turns == 3  # type: ignore[union-attr]
    assert events[-1].totals.tool_calls == 1  # type: ignore[union-attr]


def test_api_key_goes_in_the_header_and_never_into_the_transcript(
    ctx: ToolContext, tmp_path: Path
) -> None:
    with ScriptedAPI(read_config_then_report()) as api:
        result, _ = run(api, ctx, tmp_path)
    headers = api.requests[0].headers
    sent = headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")
    assert sent == "sk-ant-test-key-0123456789abcdefghij"
    assert b"sk-ant-test-key" not in Path(result.transcript).read_bytes()
    clear_registered_secrets()


def test_a_tool_error_goes_back_as_is_error_and_the_run_goes_on(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        message(
            tool_use("toolu_1", "read_json", path="/etc/passwd"),
            tool_use("toolu_2", "read_json", path="config.json", bogus=1),
        ),
        message(text("Both failed; nothing to report.")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path)
    assert result.status == "unsupported"  # no finding was reported
    results = api.bodies()[1]["messages"][-1]["content"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [
        ("toolu_1", True),
        ("toolu_2", True),
    ]
    assert "outside the roots" in results[0]["content"]
    assert "bogus" in results[1]["content"]
    executed = [e for e in events if isinstance(e, ToolExecuted)]
    assert [e.result.ok for e in executed] == [False, False]


def test_tool_calls_of_one_turn_run_concurrently(
    ctx: ToolContext, tmp_path: Path, sleepy: list[tuple[float, float]]
) -> None:
    script = [
        message(*(tool_use(f"toolu_{i}", "sleepy", label=str(i)) for i in range(3))),
        message(text("done")),
    ]
    with ScriptedAPI(script) as api:
        run(api, ctx, tmp_path)
    assert len(sleepy) == 3
    starts, ends = [s for s, _ in sleepy], [e for _, e in sleepy]
    # Every call started before any had finished: they overlapped (serially, 1.5 s).
    assert max(starts) < min(ends)
    assert max(ends) - min(starts) < 1.2
    results = api.bodies()[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_0", "toolu_1", "toolu_2"]


def test_overload_rate_limit_and_reset_are_retried_and_recorded(
    ctx: ToolContext, tmp_path: Path
) -> None:
    script = [
        status(529),
        message(tool_use("toolu_1", "read_json", path="config.json")),
        status(429, retry_after="1"),
        message(text("checked")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path)
    assert result.status == "unsupported"  # no finding was reported
    turns = [e for e in events if isinstance(e, ModelTurn)]
    assert [r.reason for r in turns[0].retries] == ["HTTP 529"]
    assert [r.reason for r in turns[1].retries] == ["HTTP 429, retry-after 1"]
    assert turns[1].retries[0].wait_s >= 0.95  # retry-after was honoured
    gap = api.requests[3].at - api.requests[2].at
    assert gap >= 0.95


def test_a_connection_reset_is_retried_and_recorded(ctx: ToolContext, tmp_path: Path) -> None:
    with ScriptedAPI([RESET, message(text("nothing to check"))]) as api:
        result, events = run(api, ctx, tmp_path)
    assert result.status == "unsupported"  # no finding was reported
    assert len(api.requests) == 2
    turn = next(e for e in events if isinstance(e, ModelTurn))
    assert [r.reason for r in turn.retries] == ["connection error"]


def test_a_server_that_keeps_failing_ends_the_run_with_an_error(
    ctx: ToolContext, tmp_path: Path
) -> None:
    with ScriptedAPI([status(500)] * 4) as api:
        result, events = run(api, ctx, tmp_path, attempts=2)
    assert result.status == "error"
    assert "HTTP 500" in result.answer
    assert len(api.requests) == 2
    assert events[-2].type == "error"
    assert events[-1].status == "error"  # type: ignore[union-attr]


def test_a_model_that_never_finishes_is_stopped_by_the_budget_after_one_last_turn(
    ctx: ToolContext, tmp_path: Path
) -> None:
    def forever(body: Any, index: int) -> Any:
        if body["messages"][-1]["content"][-1].get("text", "").startswith("The budget is spent"):
            return message(
                finding(
                    f"toolu_f{index}",
                    "Config declares MTP.",
                    [("toolu_0", '"num_nextn_predict_layers": 1')],
                )
            )
        return message(tool_use(f"toolu_{index}", "read_json", path="config.json"))

    with ScriptedAPI(forever) as api:
        result, events = run(api, ctx, tmp_path, budget=Budget(max_turns=3))
    assert result.status == "budget_exhausted"
    assert "max_turns (3)" in result.answer
    assert len(api.requests) == 4  # three turns, then the one last turn
    last = api.bodies()[-1]["messages"][-1]["content"]
    assert "report_finding" in last[-1]["text"]
    assert [f.grounded for f in result.findings] == [True]
    assert events[-1].totals.turns == 4  # type: ignore[union-attr]


def test_the_last_turn_runs_only_report_finding(ctx: ToolContext, tmp_path: Path) -> None:
    script = [
        message(tool_use("toolu_1", "read_json", path="config.json")),
        message(tool_use("toolu_2", "read_json", path="config.json")),
    ]
    with ScriptedAPI(script) as api:
        result, events = run(api, ctx, tmp_path, budget=Budget(max_tool_calls=1))
    assert result.status == "unsupported" and "max_tool_calls (1)" in result.answer
    refused = [e for e in events if isinstance(e, ToolExecuted) and e.call_id == "toolu_2"]
    assert not refused[0].result.ok and "not run" in refused[0].result.output


def test_messages_from_events_rebuilds_the_conversation_sent(
    ctx: ToolContext, tmp_path: Path
) -> None:
    with ScriptedAPI(read_config_then_report()) as api:
        _, events = run(api, ctx, tmp_path)
    rebuilt = messages_from_events(events)
    sent = api.bodies()[-1]["messages"]
    sent[-1]["content"][-1].pop("cache_control")
    # What the model is sent is the rebuilt conversation with its outputs' lines numbered.
    assert shown_conversation(rebuilt)[: len(sent)] == sent
    # A crash after the model asked for a tool but before it ran drops that turn (and only it).
    cut = [e for e in events if not (isinstance(e, ToolExecuted) and e.call_id == "toolu_2")]
    kept = messages_from_events(cut)
    assert len(kept) == 4 and "toolu_2" not in json.dumps(kept)


def test_thinking_blocks_go_back_unchanged(ctx: ToolContext, tmp_path: Path) -> None:
    thinking = {"type": "thinking", "thinking": "Check the config first.", "signature": "c2ln"}
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    script = [
        message(thinking, redacted, tool_use("toolu_1", "read_json", path="config.json")),
        message(text("One MTP layer is declared.")),
    ]
    with ScriptedAPI(script) as api:
        result, _ = run(api, ctx, tmp_path)
    assert result.status == "unsupported"  # no finding was reported
    sent_back = api.bodies()[1]["messages"][1]["content"]
    assert sent_back[0] == thinking and sent_back[1] == redacted
