"""Approvals during a run: recorded as events with the call id, and the CLI's approver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.cli.common import approver
from sleuth.config import HostConfig, Settings
from sleuth.tools import registry
from sleuth.tools.approval import ApprovalRequest
from sleuth.tools.context import ToolContext, build_context
from sleuth.tools.registry import ToolInput, tool
from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.results import ToolResult
from tests.scripted_api import ScriptedAPI, message, text, tool_use
from tests.test_agent_anthropic import run


class TouchInput(ToolInput):
    label: str


@pytest.fixture
def touch() -> Iterator[list[str]]:
    """A test-only mutating tool; unregistered afterwards."""
    touched: list[str] = []

    @tool(mutating=True)
    def touch_file(ctx: ToolContext, args: TouchInput) -> ToolResult:
        """Pretend to change the host."""
        touched.append(args.label)
        return ToolResult(ok=True, output=f"touched {args.label}")

    yield touched
    registry._TOOLS.pop("touch_file", None)


def context(tmp_path: Path, yes: bool) -> ToolContext:
    settings = Settings(hosts={"local": HostConfig(roots=[str(tmp_path)], allow=["touch_file"])})
    return build_context(settings, [], approver=approver(yes, interactive=False))


@pytest.mark.parametrize("yes", [True, False])
def test_approvals_are_recorded_with_their_call_id(
    tmp_path: Path, touch: list[str], yes: bool
) -> None:
    script = [message(tool_use("toolu_t", "touch_file", label="a")), message(text("done"))]
    with ScriptedAPI(script) as api:
        _, events = run(api, context(tmp_path, yes), tmp_path)
    (approval,) = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approval.call_id == "toolu_t" and approval.tool == "touch_file"
    assert approval.approved is yes
    assert approval.by == ("--yes" if yes else "non-interactive")
    executed = next(e for e in events if isinstance(e, ToolExecuted))
    assert executed.result.ok is yes
    assert touch == (["a"] if yes else [])
    if not yes:
        assert "--yes" in api.bodies()[1]["messages"][-1]["content"][0]["content"]


def test_the_non_interactive_refusal_names_the_flag() -> None:
    request = ApprovalRequest(tool="launch_server", host="gpu1", input={})
    decision = approver(False, interactive=False)(request)
    assert not decision.approved and "--yes" in decision.reason
