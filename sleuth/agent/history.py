"""Rebuild a conversation from transcript events, so resume and replay can reuse the loop.

The messages sent to a brain are a pure function of the recorded events: the
opening user message (question and hosts), then per model turn the assistant's
content and one user message with that turn's tool results (plus the budget
notice when the budget ran out). A turn whose tool calls were not all recorded
(a crash mid-turn) is left out, so a resumed run repeats it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sleuth.transcripts.events import (
    ContentBlock,
    ErrorEvent,
    Event,
    HostInfo,
    ModelTurn,
    SessionStarted,
    ToolExecuted,
)

Message = dict[str, Any]
BUDGET_WHERE = "budget"
CUT_OFF = ("max_tokens", "model_context_window_exceeded")
"""Stop reasons that cut a reply short: its tool calls may be half-written and never run."""
CUT_OFF_RESULT = (
    "not run: your reply was cut off at its token limit while this call was being written, so "
    "its input may be incomplete. The next turn has more room: repeat the call if you still "
    "need it, or make it smaller."
)


def opening_message(question: str, hosts: Sequence[HostInfo]) -> Message:
    lines = [f"Question: {question}", "", "Hosts you can use (pass `host` to every tool):"]
    for h in hosts:
        roots = ", ".join(h.roots) or "(no roots)"
        allow = f"; may also run: {', '.join(h.allow)}" if h.allow else ""
        lines.append(f"- {h.name} ({h.address or h.name}): roots {roots}{allow}")
    return {"role": "user", "content": [{"type": "text", "text": "\n".join(lines)}]}


def budget_notice(reason: str) -> str:
    return (
        f"The budget is spent: {reason}. This is your last turn. Report what the evidence so far "
        "supports with report_finding (one call per claim); no other tool will run."
    )


def assistant_message(content: Sequence[ContentBlock]) -> Message:
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in content]}


def tool_result_block(call_id: str, output: str, is_error: bool) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": output or "(no output)",
        "is_error": is_error,
    }


def messages_from_events(events: Sequence[Event]) -> list[Message]:
    """The conversation as of the last complete turn of a transcript."""
    start = next((e for e in events if isinstance(e, SessionStarted)), None)
    if start is None:
        raise ValueError("transcript has no session_started event; it cannot be continued")
    messages = [opening_message(start.question, start.hosts)]
    results = {e.call_id: e for e in events if isinstance(e, ToolExecuted)}
    notices = [e.message for e in events if isinstance(e, ErrorEvent) and e.where == BUDGET_WHERE]
    for i, event in enumerate(events):
        if not isinstance(event, ModelTurn):
            continue
        calls = [b.id or "" for b in event.response.content if b.type == "tool_use"]
        cut = event.response.stop_reason in CUT_OFF
        if not cut and any(c not in results for c in calls):
            break
        messages.append(assistant_message(event.response.content))
        if not calls:
            continue
        blocks: list[dict[str, Any]] = [
            tool_result_block(c, CUT_OFF_RESULT, True)
            if cut
            else tool_result_block(c, results[c].output, not results[c].ok)
            for c in calls
        ]
        if notices and _budget_notice_follows(events, i):
            blocks.append({"type": "text", "text": budget_notice(notices[0])})
        messages.append({"role": "user", "content": blocks})
    return messages


def _budget_notice_follows(events: Sequence[Event], turn_index: int) -> bool:
    for later in events[turn_index + 1 :]:
        if isinstance(later, ModelTurn):
            return False
        if isinstance(later, ErrorEvent) and later.where == BUDGET_WHERE:
            return True
    return False
