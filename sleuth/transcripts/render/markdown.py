"""The story as Markdown: verdicts and summary first, long outputs in `<details>`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.transcripts.events import Event, Finding, ToolExecuted
from sleuth.transcripts.render import phrases
from sleuth.transcripts.render.fleet import COLUMNS, fleet_of, fleet_rows, hosts_note, summary
from sleuth.transcripts.render.steps import tell
from sleuth.transcripts.render.story import Story, build_story


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>") or " "


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
        return [f"## Turn {number}", "", text or "_(no text; tool calls only)_", ""]

    def call(self, call: ToolExecuted) -> list[str]:
        lines = [
            f'<a id="{phrases.anchor(call.call_id)}"></a>',
            f"**Call `{call.call_id}`: {phrases.tool_where(call)}** · {phrases.call_status(call)}"
            f" · {call.result.duration_s:.2f} s"
            + (f" · {call.result.bytes_cut} bytes cut" if call.result.bytes_cut else ""),
            "",
            _fence(json.dumps(call.input, ensure_ascii=False), "json"),
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
            f"### Finding: {f.claim}",
            "",
            f"**{f.verdict}** · confidence {f.confidence:.2f} · "
            + phrases.grounded_mark(f.grounded),
            "",
        ]
        for ev in f.evidence:
            link = f"[{self.story.call_label(ev.call_id)}](#{phrases.anchor(ev.call_id)})"
            lines.append(f"- {link} {hosts_note(ev)}({phrases.evidence_head(ev)}):")
            lines += ["", "  " + _fence(ev.shown).replace("\n", "\n  "), ""]
            note = phrases.evidence_note(ev)
            if note:
                lines += [f"  {note}", ""]
        if f.next_steps:
            lines += ["Next steps:", "", *(f"- {step}" for step in f.next_steps), ""]
        return lines

    def approval(self, tool: str, host: str, outcome: str) -> list[str]:
        return [f"> Approval: {tool} on `{host}` {outcome}", ""]

    def error(self, where: str, message: str) -> list[str]:
        return [f"> **Error** ({where}): {message}", ""]

    def budget(self, reason: str) -> list[str]:
        return [f"> **Budget spent:** {reason}; the next turn was the last.", ""]

    def segment(self, line: str) -> list[str]:
        return [f"> **{line}**", ""]


def render_markdown(events: Sequence[Event], banner: phrases.Banner | None = None) -> str:
    story = build_story(events)
    out = [banner.text, ""] if banner else []  # first, so no reader can miss it
    out += ["# Sleuth investigation", ""]
    if story.started is not None:
        s = story.started
        out += [f"**Question:** {s.question}", ""]
        out += [phrases.session_line(s), ""]
    verdicts = [
        f"- **{f.verdict.upper()}** {f.claim} ({phrases.grounded_mark(f.grounded)})"
        for f in story.findings()
    ]
    out += ["## Verdicts", "", *(verdicts or ["No findings were reported."]), ""]
    out += ["## Summary", "", story.totals_line(), ""]
    if answer := story.unsupported_answer():
        out += [answer, ""]
    for told in tell(story, _Markdown(story)):
        out += told or []
    return "\n".join(out)
