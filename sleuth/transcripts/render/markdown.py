"""The story as Markdown: verdicts and summary first, long outputs in `<details>`.

What a model, a host or a file wrote never forms the report's structure: a line of it (a
claim, a step, a reason) has every character that makes Markdown or HTML escaped and its line
ends shown as `\\n` (`_inline`), and more than a line (reasoning, an answer, an error, tool
output) is a fenced block longer than any fence inside it (`_fence`), so a model cannot write
a call block, an approval line or a "✓ grounded" finding of its own. Control characters are
shown escaped everywhere (`transcripts.controls`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.transcripts.controls import printable_json, shown
from sleuth.transcripts.events import Event, Finding, ToolExecuted
from sleuth.transcripts.render import phrases
from sleuth.transcripts.render.fleet import COLUMNS, fleet_of, fleet_rows, hosts_note, summary
from sleuth.transcripts.render.steps import tell
from sleuth.transcripts.render.story import Story, build_story

_MARKUP = re.compile(r"([\\`*\[\]<>|&~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
"""The characters that start Markdown or HTML inside a line: emphasis, code, links, images,
tags, entities, table cells, strike-through. A backslash escapes any of them; an underscore
between two letters or digits (`read_lines`) starts nothing, so it is left as it is."""


def _fence(text: str, info: str = "") -> str:
    text = shown(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _inline(text: str) -> str:
    """Text from a model or a host within one line of the report, shown as the characters it
    is: its line ends as `\\n` (no new block can start) and its markup escaped."""
    return _MARKUP.sub(r"\\\1", shown(text, keep=""))


def _code(text: str) -> str:
    """A code span that no backtick in `text` can close."""
    text = shown(text, keep="")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}" if longest else f"{ticks}{text}{ticks}"


def _md_cell(text: str) -> str:
    return "<br>".join(_inline(line) for line in text.split("\n")) or " "


def _md_fleet(story: Story, call: ToolExecuted) -> list[str] | None:
    fleet = fleet_of(call)
    if fleet is None:
        return None
    rows = [f"| {' | '.join(COLUMNS)} |", f"|{'---|' * len(COLUMNS)}"]
    for row in fleet_rows(fleet):
        rows.append("| " + " | ".join(_md_cell(cell) for cell in row.cells()) + " |")
    return ["", *rows, "", summary(fleet, len(story.parts.get(call.call_id, [])))]


@dataclass(frozen=True)
class _Markdown:
    """Markdown's telling of each step, as lines."""

    story: Story

    def turn(self, number: int, text: str) -> list[str]:
        if not text:
            return [f"## Turn {number}", "", "_(no text; tool calls only)_", ""]
        return [f"## Turn {number}", "", "The model wrote:", "", _fence(text, "text"), ""]

    def call(self, call: ToolExecuted) -> list[str]:
        lines = [
            f'<a id="{phrases.anchor(call.call_id)}"></a>',
            f"**Call {_code(call.call_id)}: {_inline(phrases.tool_where(call))}** · "
            f"{phrases.call_status(call)}"
            f" · {call.result.duration_s:.2f} s"
            + (f" · {call.result.bytes_cut} bytes cut" if call.result.bytes_cut else ""),
            "",
            _fence(printable_json(call.input), "json"),
        ]
        if call.result.argv:
            lines += ["", "Ran:", "", _fence("\n".join(phrases.command_lines(call)), "sh")]
        output = call.result.output or "(no output)"
        fleet = _md_fleet(self.story, call)
        if fleet is not None:
            lines += fleet
        elif phrases.is_long(output):
            count = output.count("\n") + 1
            lines += ["", f"<details><summary>output ({count} lines)</summary>", ""]
            lines += [_fence(output), "", "</details>"]
        else:
            lines += ["", _fence(output)]
        return [*lines, ""]

    def finding(self, f: Finding) -> list[str]:
        lines = [
            f"### Finding: {_inline(f.claim)}",
            "",
            f"**{f.verdict}** · confidence {f.confidence:.2f} · "
            + phrases.grounded_mark(f.grounded),
            "",
        ]
        for ev in f.evidence:
            link = f"[{_inline(self.story.call_label(ev.call_id))}](#{phrases.anchor(ev.call_id)})"
            lines.append(
                f"- {link} {_inline(hosts_note(ev))}({_inline(phrases.evidence_head(ev))}):"
            )
            lines += ["", "  " + _fence(ev.shown).replace("\n", "\n  "), ""]
            note = phrases.evidence_note(ev)
            if note:
                lines += [f"  {_inline(note)}", ""]
        if f.next_steps:
            lines += ["Next steps:", "", *(f"- {_inline(step)}" for step in f.next_steps), ""]
        return lines

    def approval(self, tool: str, host: str, outcome: str) -> list[str]:
        return [f"> Approval: {_inline(tool)} on {_code(host)} {_inline(outcome)}", ""]

    def error(self, where: str, message: str) -> list[str]:
        return [f"**Error** ({_inline(where)}):", "", _fence(message), ""]

    def budget(self, reason: str) -> list[str]:
        return [f"> **Budget spent:** {_inline(reason)}; the next turn was the last.", ""]

    def segment(self, line: str) -> list[str]:
        return [f"> **{_inline(line)}**", ""]


def render_markdown(events: Sequence[Event], banner: phrases.Banner | None = None) -> str:
    story = build_story(events)
    out = [banner.text, ""] if banner else []  # first, so no reader can miss it
    out += ["# Sleuth investigation", ""]
    if story.started is not None:
        s = story.started
        out += [f"**Question:** {_inline(s.question)}", ""]
        out += [_inline(phrases.session_line(s)), ""]
    verdicts = [
        f"- **{f.verdict.upper()}** {_inline(f.claim)} ({phrases.grounded_mark(f.grounded)})"
        for f in story.findings()
    ]
    out += ["## Verdicts", "", *(verdicts or ["No findings were reported."]), ""]
    out += ["## Summary", "", _inline(story.totals_line()), ""]
    if answer := story.unsupported_answer():
        out += ["The model's answer, which no grounded finding supports:", "", _fence(answer), ""]
    for told in tell(story, _Markdown(story)):
        out += told or []
    return "\n".join(out)
