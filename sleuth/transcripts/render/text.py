"""The story for a terminal (rich panels and rules), and the same as plain text. What a model,
a host or a file wrote is shown with its control characters escaped (`transcripts.controls`)
and, inside markup, its markup escaped (`_m`)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, Group, RenderableType
from rich.markup import escape as escape_markup
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from sleuth.transcripts.controls import printable_json, shown
from sleuth.transcripts.events import Event, Finding, ToolExecuted
from sleuth.transcripts.render import phrases
from sleuth.transcripts.render.fleet import COLUMNS, fleet_of, fleet_rows, hosts_note, summary
from sleuth.transcripts.render.steps import tell
from sleuth.transcripts.render.story import Story, build_story

TEXT_HEAD_LINES = 12
"""How much of a folded output the terminal form still shows."""


def _m(text: str) -> str:
    return escape_markup(shown(text))


def _fold_text(output: str) -> str:
    if not phrases.is_long(output):
        return output
    lines = output.splitlines()
    head = "\n".join(lines[:TEXT_HEAD_LINES])[: phrases.FOLD_CHARS]
    return f"{head}\n… {len(lines) - TEXT_HEAD_LINES} more lines folded (--format html shows all)"


@dataclass(frozen=True)
class _Rich:
    """The terminal's telling of each step."""

    story: Story

    def turn(self, number: int, text: str) -> RenderableType:
        return Group(Rule(f"Turn {number}", align="left"), Text(shown(text) or "(tool calls only)"))

    def call(self, call: ToolExecuted) -> RenderableType:
        colour = "green" if call.result.ok and call.result.exit_code in (None, 0) else "red"
        cut = f" · {call.result.bytes_cut} bytes cut" if call.result.bytes_cut else ""
        where = f" on [cyan]{_m(call.host)}[/]" if call.host else ""
        title = (
            f"[bold]{_m(call.tool)}[/]{where} · "
            f"[{colour}]{_m(phrases.call_status(call))}[/] · "
            f"{call.result.duration_s:.2f} s{cut}"
        )
        body: list[RenderableType] = [Text(printable_json(call.input), style="dim")]
        body += [Text("$ " + line, style="yellow") for line in phrases.command_lines(call)]
        fleet = fleet_of(call)
        if fleet is not None:
            table = Table(*COLUMNS, show_lines=True)
            for row in fleet_rows(fleet):
                table.add_row(*(_m(cell) for cell in row.cells()))
            parts = len(self.story.parts.get(call.call_id, []))
            body += [table, Text(summary(fleet, parts), "dim")]
        else:
            body.append(Text(shown(_fold_text(call.result.output or "(no output)"))))
        return Panel(Group(*body), title=title, subtitle=_m(call.call_id), title_align="left")

    def finding(self, f: Finding) -> RenderableType:
        colour = "green" if f.grounded else "yellow"
        lines: list[RenderableType] = [
            Text.from_markup(
                f"[bold]{_m(f.verdict)}[/] · confidence {f.confidence:.2f} · "
                f"[{colour}]{_m(phrases.grounded_mark(f.grounded))}[/]"
            )
        ]
        for ev in f.evidence:
            lines.append(
                Text.from_markup(
                    f"→ call [cyan]{_m(self.story.call_label(ev.call_id))}[/] "
                    f"{_m(hosts_note(ev))}({_m(phrases.evidence_head(ev))}): "
                )
                + Text(shown(ev.shown), style="italic")
            )
            note = phrases.evidence_note(ev)
            if note:
                lines.append(Text("  " + shown(note), style="dim"))
        lines += [Text(f"next: {shown(step)}", style="dim") for step in f.next_steps]
        title = Text(f"Finding: {shown(f.claim, keep='')}", style="bold")
        return Panel(Group(*lines), title=title, border_style="blue")

    def approval(self, tool: str, host: str, outcome: str) -> RenderableType:
        return Text(shown(f"approval: {tool} on {host} {outcome}"), "dim")

    def error(self, where: str, message: str) -> RenderableType:
        return Text(shown(f"error ({where}): {message}"), style="red")

    def budget(self, reason: str) -> RenderableType:
        return Text(shown(f"budget spent: {reason}; the next turn was the last"), style="yellow")

    def segment(self, line: str) -> RenderableType:
        return Rule(_m(line), align="left", style="yellow")


_VERDICT_COLOUR = {"yes": "green", "no": "red", "partial": "yellow", "unknown": "white"}


_BANNER_STYLE = {"signed": "bold green", "partial": "bold yellow", "failed": "bold white on red"}


def render_rich(events: Sequence[Event], banner: phrases.Banner | None = None) -> RenderableType:
    story = build_story(events)
    parts: list[RenderableType] = []
    if banner:
        parts.append(Text(banner.text, style=_BANNER_STYLE[banner.level]))
    if story.started is not None:
        s = story.started
        question = Text(shown(s.question), style="bold")
        parts.append(Panel(question, title="Question", title_align="left"))
        parts.append(Text(shown(phrases.session_line(s)), "dim"))
    parts.append(Rule("Verdicts", align="left"))
    for f in story.findings():
        colour = _VERDICT_COLOUR.get(f.verdict, "white")
        parts.append(
            Text.from_markup(f"[bold {colour}]{f.verdict.upper():>7}[/] ")
            + Text(f"{shown(f.claim, keep='')} ({phrases.grounded_mark(f.grounded)})")
        )
    if not story.findings():
        parts.append(Text("No findings were reported."))
    parts += [Rule("Summary", align="left"), Text(shown(story.totals_line()))]
    if answer := story.unsupported_answer():
        parts.append(Text(shown(answer), style="yellow"))
    parts += [told for told in tell(story, _Rich(story)) if told is not None]
    return Group(*parts)


def render_text(
    events: Sequence[Event], banner: phrases.Banner | None = None, width: int = 100
) -> str:
    """The terminal form as plain text (for `--output FILE`)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, force_terminal=False).print(
        render_rich(events, banner)
    )
    return buffer.getvalue()
