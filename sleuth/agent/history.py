"""Rebuild a conversation from transcript events, so resume and replay can reuse the loop.

The messages sent to a brain are a pure function of the recorded events: the
opening user message (question and hosts), then per model turn the assistant's
content and one user message with that turn's tool results (plus the budget
notice when the budget ran out) or the notice a call written as text got, as
`transcripts.recording` reads them. A turn whose tool calls were not all
recorded (a crash mid-turn) is left out, so a resumed run repeats it; the
completed turns before and after it all stay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sleuth.transcripts.events import ContentBlock, Event, HostInfo
from sleuth.transcripts.recording import NotARecording, read

Message = dict[str, Any]
NO_OUTPUT = "(no output)"
"""What a model is told for a tool that printed nothing."""
CUT_OFF_RESULT = (
    "not run: your reply was cut off at its token limit while this call was being written, so "
    "its input may be incomplete. The next turn has more room: repeat the call if you still "
    "need it, or make it smaller."
)


# A call written in the reply's text: hermes `<tool_call>`, llama/qwen `<function=…>`, or a
# bare {"name": …, "arguments": …} object. Small local models write these when their server's
# parser misses them, or when the reply was cut off before the call was complete.
PSEUDO_CALL = re.compile(
    r"<tool_call>|<function[=>]|\{\s*\"name\"\s*:\s*\"[\w.-]+\"\s*,\s*\"(?:arguments|parameters)\""
)


def pseudo_call(text: str) -> str | None:
    """The start of a tool call written as text, or None."""
    found = PSEUDO_CALL.search(text)
    return text[found.start() : found.start() + 160] if found else None


def output_notice(snippet: str) -> str:
    """What the model is told when its reply wrote a call as text: nothing ran."""
    return (
        f"Nothing was run: your reply wrote a tool call as text ({snippet!r}), or was cut off "
        "before the call was complete. Make the call through the tools interface, with JSON "
        "arguments that follow the tool's schema; or, if you are done, report what the "
        "evidence supports with report_finding."
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
        "content": output or NO_OUTPUT,
        "is_error": is_error,
    }


def messages_from_events(events: Sequence[Event]) -> list[Message]:
    """The conversation as of the last complete turn of a transcript, across every resume."""
    try:
        recording = read(events)
    except NotARecording as exc:
        raise ValueError(f"{exc}; it cannot be continued") from exc
    messages = [opening_message(recording.start.question, recording.start.hosts)]
    for turn in recording.turns:
        messages.append(assistant_message(turn.event.response.content))
        calls = [call_id for call_id, _, _ in turn.calls]
        blocks: list[dict[str, Any]] = [
            tool_result_block(c, CUT_OFF_RESULT, True)
            if turn.cut_off
            else tool_result_block(c, turn.results[c].result.output, not turn.results[c].result.ok)
            for c in calls
        ]
        if turn.output_notice:
            blocks.append({"type": "text", "text": turn.output_notice})
        if turn.budget_notice and blocks:
            blocks.append({"type": "text", "text": budget_notice(turn.budget_notice)})
        if blocks:
            messages.append({"role": "user", "content": blocks})
    return messages
