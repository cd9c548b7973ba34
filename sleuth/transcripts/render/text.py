"""The story for a terminal (rich panels and rules), and the same as plain text."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

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
    FOLD_CHARS,
    Story,
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
    totals_line,
    unsupported_answer,
)

TEXT_HEAD_LINES = 12
"""How much of a folded output the terminal form still shows."""


def _fold_text(output: str) -> str:
    if not is_long(output):
        return output
    lines = output.splitlines()
    head = "\n".join(lines[:TEXT_HEAD_LINES])[:FOLD_CHARS]
    return f"{head}\n… {len(lines) - TEXT_HEAD_LINES} more lines folded (--format html shows all)"


def _rich_call(call: ToolExecuted) -> RenderableType:
    colour = "green" if call.result.ok and call.result.exit_code in (None, 0) else "red"
    cut = f" · {call.result.bytes_cut} bytes cut" if call.result.bytes_cut else ""
    where = f" on [cyan]{escape(call.host)}[/]" if call.host else ""
    title = (
        f"[bold]{escape(call.tool)}[/]{where} · "
        f"[{colour}]{escape(call_status(call))}[/] · {call.result.duration_s:.2f} s{cut}"
    )
    body = [Text(json.dumps(call.input, ensure_ascii=False), style="dim")]
    body += [Text("$ " + line, style="yellow") for line in command_lines(call)]
    body.append(Text(_fold_text(call.result.output or "(no output)")))
    return Panel(Group(*body), title=title, subtitle=escape(call.call_id), title_align="left")


def _rich_finding(story: Story, event: FindingEvent) -> RenderableType:
    f = event.finding
    colour = "green" if f.grounded else "yellow"
    lines: list[RenderableType] = [
        Text.from_markup(
            f"[bold]{escape(f.verdict)}[/] · confidence {f.confidence:.2f} · "
            f"[{colour}]{escape(grounded_mark(f.grounded))}[/]"
        )
    ]
    for ev in f.evidence:
        lines.append(
            Text.from_markup(
                f"→ call [cyan]{escape(call_label(story, ev.call_id))}[/]"
                f" ({escape(evidence_head(ev))}): "
            )
            + Text(ev.shown, style="italic")
        )
        note = evidence_note(ev)
        if note:
            lines.append(Text("  " + note, style="dim"))
    lines += [Text(f"next: {step}", style="dim") for step in f.next_steps]
    return Panel(
        Group(*lines), title=Text(f"Finding: {f.claim}", style="bold"), border_style="blue"
    )


def _rich_step(story: Story, step: Event) -> RenderableType | None:
    if isinstance(step, ModelTurn):
        text = reasoning(step) or "(tool calls only)"
        return Group(Rule(f"Turn {step.turn}", align="left"), Text(text))
    if isinstance(step, ToolExecuted):
        return _rich_call(step)
    if isinstance(step, FindingEvent):
        return _rich_finding(story, step)
    if isinstance(step, ApprovalEvent):
        verdict = "approved" if step.approved else "denied"
        why = f": {step.reason}" if step.reason else ""
        return Text(f"approval: {step.tool} on {step.host} {verdict} by {step.by}{why}", "dim")
    if isinstance(step, ErrorEvent):
        return Text(f"error ({step.where}): {step.message}", style="red")
    if isinstance(step, BudgetNotice):
        return Text(f"budget spent: {step.reason}; the next turn was the last", style="yellow")
    if isinstance(step, SessionStarted):
        return Rule(segment_line(step, story.segment(step)), align="left", style="yellow")
    return None


_VERDICT_COLOUR = {"yes": "green", "no": "red", "partial": "yellow", "unknown": "white"}


def render_rich(events: Sequence[Event], banner: str | None = None) -> RenderableType:
    story = build_story(events)
    parts: list[RenderableType] = []
    if banner:
        parts.append(Text(banner, style="bold white on red"))
    if story.started is not None:
        s = story.started
        parts.append(Panel(Text(s.question, style="bold"), title="Question", title_align="left"))
        parts.append(Text(session_line(s), "dim"))
    parts.append(Rule("Verdicts", align="left"))
    for e in findings_of(story):
        colour = _VERDICT_COLOUR.get(e.finding.verdict, "white")
        parts.append(
            Text.from_markup(f"[bold {colour}]{e.finding.verdict.upper():>7}[/] ")
            + Text(f"{e.finding.claim} ({grounded_mark(e.finding.grounded)})")
        )
    if not findings_of(story):
        parts.append(Text("No findings were reported."))
    parts += [Rule("Summary", align="left"), Text(totals_line(story))]
    if answer := unsupported_answer(story):
        parts.append(Text(answer, style="yellow"))
    parts += [r for r in (_rich_step(story, step) for step in story.steps) if r is not None]
    return Group(*parts)


def render_text(events: Sequence[Event], banner: str | None = None, width: int = 100) -> str:
    """The terminal form as plain text (for `--output FILE`)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, force_terminal=False).print(
        render_rich(events, banner)
    )
    return buffer.getvalue()
