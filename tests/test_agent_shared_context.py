"""Two investigations on one ToolContext: each records only its own approvals, and the context
is left exactly as it was given."""

from __future__ import annotations

import threading
from pathlib import Path

from sleuth.agent.loop import RunResult
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.transcripts.events import ApprovalEvent
from sleuth.transcripts.store import load
from tests.scripted_api import ScriptedAPI, message, text, tool_use
from tests.test_agent_anthropic import run
from tests.test_agent_approval import context, touch

__all__ = ["touch"]  # the test-only mutating tool, shared with the approval tests


def _script(label: str, call_id: str) -> list[object]:
    return [message(tool_use(call_id, "touch_file", label=label)), message(text("done"))]


def test_two_investigations_sharing_a_context_each_write_only_their_own_approvals(
    tmp_path: Path, touch: list[str]
) -> None:
    ctx = context(tmp_path, yes=True)
    heard: list[str] = []

    def watcher(request: ApprovalRequest, decision: ApprovalDecision) -> None:
        heard.append(str(request.input["label"]))

    ctx.on_approval = watcher
    results: dict[str, RunResult] = {}

    def investigate(label: str, call_id: str) -> None:
        with ScriptedAPI(_script(label, call_id)) as api:
            results[label], _ = run(api, ctx, tmp_path / label)

    first = threading.Thread(target=investigate, args=("first", "toolu_a"))
    second = threading.Thread(target=investigate, args=("second", "toolu_b"))
    first.start()
    second.start()
    first.join()
    second.join()
    # and a third, after both ended: it must not write into their closed transcripts
    investigate("third", "toolu_c")

    for label, call_id in (("first", "toolu_a"), ("second", "toolu_b"), ("third", "toolu_c")):
        events = load(Path(results[label].transcript)).events
        approvals = [e for e in events if isinstance(e, ApprovalEvent)]
        assert [(a.call_id, a.input["label"]) for a in approvals] == [(call_id, label)]
    assert ctx.on_approval is watcher, "the run must not swap the context's hook"
    assert sorted(heard) == ["first", "second", "third"]
    assert sorted(touch) == ["first", "second", "third"]
