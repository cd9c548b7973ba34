"""The story as Markdown: verdicts and summary first, long outputs in `<details>`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from sleuth.transcripts.events import (
    ApprovalEvent,
    BudgetNotice,
    ErrorEvent,
    Event,
    FindingEvent,
    ModelTurn,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.render.story import (
    Story,
    anchor,
    build_story,
    call_label,
    call_status,
    command_lines,
    evidence_head,
    evidence_note,
    findings_of,
    grounded_mark,
    is_long,
    reasoning,
    segment_line,
    session_line,
    tool_where,
    totals_line,
    unsupported_answer,
)


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _md_call(call: ToolExecuted) -> list[str]:
    lines = [
        f'<a id="{anchor(call.call_id)}"></a>',
        f"**Call `{call.call_id}`: {tool_where(call)}** · {call_status(call)}"
        f" · {call.result.duration_s:.2f} s"
        + (f" · {call.result.bytes_cut} bytes cut" if call.result.bytes_cut else ""),
        "",
        _fence(json.dumps(call.input, ensure_ascii=False), "json"),
    ]
    if call.result.argv:
        lines += ["", "Ran:", "", _fence("\n".join(command_lines(call)), "sh")]
    output = call.result.output or "(no output)"
    if is_long(output):
        count = output.count("\n") + 1
        lines += ["", f"<details><summary>output ({count} lines)</summary>", ""]
        lines += [_fence(output), "", "</details>"]
    else:
        lines += ["", _fence(output)]
    return [*lines, ""]


def _md_finding(story: Story, event: FindingEvent) -> list[str]:
    f = event.finding
    lines = [
        f"### Finding: {f.claim}",
        "",
        f"**{f.verdict}** · confidence {f.confidence:.2f} · {grounded_mark(f.grounded)}",
        "",
    ]
    for ev in f.evidence:
        link = f"[{call_label(story, ev.call_id)}](#{anchor(ev.call_id)})"
        lines.append(f"- {link} ({evidence_head(ev)}):")
        lines += ["", "  " + _fence(ev.shown).replace("\n", "\n  "), ""]
        note = evidence_note(ev)
        if note:
            lines += [f"  {note}", ""]
    if f.next_steps:
        lines += ["Next steps:", "", *(f"- {step}" for step in f.next_steps), ""]
    return lines


def _md_step(story: Story, step: Event) -> list[str]:
    if isinstance(step, ModelTurn):
        text = reasoning(step) or "_(no text; tool calls only)_"
        return [f"## Turn {step.turn}", "", text, ""]
    if isinstance(step, ToolExecuted):
        return _md_call(step)
    if isinstance(step, FindingEvent):
        return _md_finding(story, step)
    if isinstance(step, ApprovalEvent):
        verdict = "approved" if step.approved else "denied"
        why = f": {step.reason}" if step.reason else ""
        return [f"> Approval: {step.tool} on `{step.host}` {verdict} by {step.by}{why}", ""]
    if isinstance(step, ErrorEvent):
        return [f"> **Error** ({step.where}): {step.message}", ""]
    if isinstance(step, BudgetNotice):
        return [f"> **Budget spent:** {step.reason}; the next turn was the last.", ""]
    if isinstance(step, SessionStarted):
        return [f"> **{segment_line(step, story.segment(step))}**", ""]
    return []


def render_markdown(events: Sequence[Event], banner: str | None = None) -> str:
    story = build_story(events)
    out = [banner, ""] if banner else []  # first, so no reader can miss it
    out += ["# Sleuth investigation", ""]
    if story.started is not None:
        s = story.started
        out += [f"**Question:** {s.question}", ""]
        out += [session_line(s), ""]
    verdicts = [
        f"- **{f.verdict.upper()}** {f.claim} ({grounded_mark(f.grounded)})"
        for f in (e.finding for e in findings_of(story))
    ]
    out += ["## Verdicts", "", *(verdicts or ["No findings were reported."]), ""]
    out += ["## Summary", "", totals_line(story), ""]
    if answer := unsupported_answer(story):
        out += [answer, ""]
    for step in story.steps:
        out += _md_step(story, step)
    return "\n".join(out)
