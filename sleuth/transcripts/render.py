"""Tell a transcript as a story: the question, each turn's reasoning, the calls, the findings.

    events = load(path).events
    html_page = render_html(events)      # one self-contained file
    console.print(render_rich(events))   # the terminal form

Every format walks the same `Story`, built once from the events, so they agree
on what is shown: the verdicts and the summary first, then the turns. Long
outputs are folded; evidence links to the call it quotes. A transcript that
failed verification is rendered under a "NOT VERIFIED" banner in every format.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    SessionEnded,
    SessionStarted,
    ToolExecuted,
    Totals,
)
from sleuth.transcripts.recording import totals

FOLD_LINES = 20
"""Outputs longer than this many lines (or FOLD_CHARS) are folded."""
FOLD_CHARS = 2000
TEXT_HEAD_LINES = 12
"""How much of a folded output the terminal form still shows."""

FORMATS = ("text", "md", "html", "json")


@dataclass
class Story:
    """The events regrouped for reading. Steps keep the transcript's order."""

    started: SessionStarted | None = None
    steps: list[Event] = field(default_factory=list)
    ended: SessionEnded | None = None
    calls: dict[str, ToolExecuted] = field(default_factory=dict)
    events: Sequence[Event] = ()

    def segment(self, started: SessionStarted) -> int:
        """1 for the first run, 2 for the first resume, and so on."""
        resumes = [s for s in self.steps if isinstance(s, SessionStarted)]
        return 2 + next((i for i, s in enumerate(resumes) if s is started), 0)


def build_story(events: Sequence[Event]) -> Story:
    story = Story(events=events)
    for event in events:
        if isinstance(event, SessionStarted) and story.started is None:
            story.started = event
        elif isinstance(event, SessionEnded):
            story.ended = event
        else:
            story.steps.append(event)
            if isinstance(event, ToolExecuted):
                story.calls[event.call_id] = event
    return story


def totals_of(story: Story) -> Totals:
    """The recorded totals, or ones counted by the reader when the session never ended."""
    if story.ended is not None:
        return story.ended.totals
    return totals(story.events)


def reasoning(turn: ModelTurn) -> str:
    return "\n\n".join(
        block.text for block in turn.response.content if block.type == "text" and block.text
    )


def command_lines(call: ToolExecuted) -> list[str]:
    return [" ".join(_shell_word(word) for word in argv) for argv in call.argv]


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_./:=@%+,-]+", word) else json.dumps(word)


def is_long(text: str) -> bool:
    return text.count("\n") >= FOLD_LINES or len(text) > FOLD_CHARS


def anchor(call_id: str) -> str:
    return "call-" + re.sub(r"[^A-Za-z0-9_-]", "-", call_id)


def call_label(story: Story, call_id: str) -> str:
    call = story.calls.get(call_id)
    if call is None:
        return f"{call_id} (not in this transcript)"
    return f"{call_id} ({_tool_where(call)})"


def _tool_where(call: ToolExecuted) -> str:
    """`grep on gpu1`; report_finding runs on no host, so it says none."""
    return f"{call.tool} on {call.host}" if call.host else call.tool


def _findings(story: Story) -> list[FindingEvent]:
    return [step for step in story.steps if isinstance(step, FindingEvent)]


def _segment_line(s: SessionStarted, number: int) -> str:
    return f"resumed here (segment {number}) from {s.resumed_from} · {_session_line(s)}"


def _status(call: ToolExecuted) -> str:
    if not call.ok:
        return "failed"
    return "ok" if call.exit_code in (None, 0) else f"exit {call.exit_code}"


def _totals_line(story: Story) -> str:
    t = totals_of(story)
    status = story.ended.status if story.ended else "not finished (no session_ended event)"
    return (
        f"status {status} · {t.turns} turns · {t.tool_calls} tool calls · "
        f"{t.input_tokens} in / {t.output_tokens} out tokens "
        f"(cache {t.cache_read_tokens} read, {t.cache_write_tokens} written) · "
        f"${t.cost_usd:.4f} · {t.wall_s:.1f} s"
    )


def _unsupported(story: Story) -> str | None:
    """A run that ended with no grounded finding: the model's answer, marked as what it is."""
    if story.ended is not None and story.ended.status == "unsupported":
        return story.ended.summary
    return None


def _session_line(s: SessionStarted) -> str:
    hosts = ", ".join(
        f"{h.name} ({h.address})" if h.address and h.address != h.name else h.name for h in s.hosts
    )
    hosts = hosts or "none"
    model = f" ({s.model})" if s.model else ""
    return f"session {s.session_id} · brain {s.brain}{model} · hosts {hosts}"


def _grounded_mark(grounded: bool | None) -> str:
    return {True: "✓ grounded", False: "✗ not grounded", None: "unchecked"}[grounded]


# --- JSON -----------------------------------------------------------------


def render_json(events: Sequence[Event], banner: str | None = None) -> str:
    """`{"verified": ..., "banner": ..., "events": [...]}`, the events exactly as stored."""
    data = {
        "verified": banner is None,
        "banner": banner,
        "events": [event.model_dump(mode="json") for event in events],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# --- Markdown -------------------------------------------------------------


def _fence(text: str, info: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _md_call(call: ToolExecuted) -> list[str]:
    lines = [
        f'<a id="{anchor(call.call_id)}"></a>',
        f"**Call `{call.call_id}`: {_tool_where(call)}** · {_status(call)}"
        f" · {call.duration_s:.2f} s"
        + (f" · {call.bytes_cut} bytes cut" if call.bytes_cut else ""),
        "",
        _fence(json.dumps(call.input, ensure_ascii=False), "json"),
    ]
    if call.argv:
        lines += ["", "Ran:", "", _fence("\n".join(command_lines(call)), "sh")]
    output = call.output or "(no output)"
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
        f"**{f.verdict}** · confidence {f.confidence:.2f} · {_grounded_mark(f.grounded)}",
        "",
    ]
    for ev in f.evidence:
        link = f"[{call_label(story, ev.call_id)}](#{anchor(ev.call_id)})"
        lines.append(f"- {link} ({_grounded_mark(ev.grounded)}):")
        lines += ["", "  " + _fence(ev.quote).replace("\n", "\n  "), ""]
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
        return [f"> **{_segment_line(step, story.segment(step))}**", ""]
    return []


def render_markdown(events: Sequence[Event], banner: str | None = None) -> str:
    story = build_story(events)
    out = [banner, ""] if banner else []  # first, so no reader can miss it
    out += ["# Sleuth investigation", ""]
    if story.started is not None:
        s = story.started
        out += [f"**Question:** {s.question}", ""]
        out += [_session_line(s), ""]
    verdicts = [
        f"- **{f.verdict.upper()}** {f.claim} ({_grounded_mark(f.grounded)})"
        for f in (e.finding for e in _findings(story))
    ]
    out += ["## Verdicts", "", *(verdicts or ["No findings were reported."]), ""]
    out += ["## Summary", "", _totals_line(story), ""]
    if answer := _unsupported(story):
        out += [answer, ""]
    for step in story.steps:
        out += _md_step(story, step)
    return "\n".join(out)


# --- HTML -----------------------------------------------------------------

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d1d1f;background:#fff}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
.question{font-size:1.1rem;background:#f4f6fb;padding:.75rem 1rem;border-radius:6px}
.meta,.call-head{color:#555;font-size:.9rem}
.call{border:1px solid #ddd;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}
.call:target{border-color:#3b6fd8;box-shadow:0 0 0 2px #c9d8f7}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font:13px/1.4 ui-monospace,monospace}
.finding{border-left:4px solid #3b6fd8;padding:.25rem 1rem;margin:1rem 0;background:#fafbff}
.ok{color:#1a7f37}.bad{color:#c62828}.warn{color:#9a6700}
.banner{background:#c62828;color:#fff;padding:.75rem 1rem;border-radius:6px;font-weight:bold}
.verdicts{list-style:none;padding:0}.verdicts li{margin:.4rem 0}
.verdict{display:inline-block;min-width:4.5rem;text-align:center;font-weight:bold;
border-radius:4px;padding:0 .4rem;color:#fff;margin-right:.5rem}
.verdict-yes{background:#1a7f37}.verdict-no{background:#c62828}
.verdict-partial{background:#b26a00}.verdict-unknown{background:#6e7781}
.segment{background:#fff8e1;padding:.5rem 1rem;border-radius:6px}
summary{cursor:pointer;color:#3b6fd8}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _html_call(call: ToolExecuted) -> str:
    cls = "ok" if call.ok and call.exit_code in (None, 0) else "bad"
    cut = f" · {call.bytes_cut} bytes cut" if call.bytes_cut else ""
    parts = [
        f'<div class="call" id="{anchor(call.call_id)}">',
        f'<div class="call-head"><b>{_e(call.tool)}</b>'
        + (f" on <code>{_e(call.host)}</code>" if call.host else "")
        + f' · <span class="{cls}">{_e(_status(call))}</span> · {call.duration_s:.2f} s{cut}'
        f" · call <code>{_e(call.call_id)}</code></div>",
        f"<pre>{_e(json.dumps(call.input, ensure_ascii=False))}</pre>",
    ]
    if call.argv:
        parts.append(f"<pre>$ {_e(chr(10).join(command_lines(call)))}</pre>")
    output = call.output or "(no output)"
    if is_long(output):
        count = output.count("\n") + 1
        parts.append(
            f"<details><summary>output ({count} lines)</summary><pre>{_e(output)}</pre></details>"
        )
    else:
        parts.append(f"<pre>{_e(output)}</pre>")
    return "\n".join([*parts, "</div>"])


def _html_finding(story: Story, event: FindingEvent) -> str:
    f = event.finding
    mark_cls = "ok" if f.grounded else "warn"
    items = []
    for ev in f.evidence:
        ev_cls = "ok" if ev.grounded else "warn"
        items.append(
            f'<li><a href="#{anchor(ev.call_id)}">{_e(call_label(story, ev.call_id))}</a>'
            f' <span class="{ev_cls}">{_e(_grounded_mark(ev.grounded))}</span>'
            f"<pre>{_e(ev.quote)}</pre></li>"
        )
    steps = "".join(f"<li>{_e(step)}</li>" for step in f.next_steps)
    return (
        f'<div class="finding"><h3>{_e(f.claim)}</h3>'
        f"<p>{_verdict_badge(f.verdict)} confidence {f.confidence:.2f} · "
        f'<span class="{mark_cls}">{_e(_grounded_mark(f.grounded))}</span></p>'
        f"<ul>{''.join(items)}</ul>"
        + (f"<p>Next steps:</p><ul>{steps}</ul>" if steps else "")
        + "</div>"
    )


def _html_step(story: Story, step: Event) -> str:
    if isinstance(step, ModelTurn):
        text = reasoning(step)
        body = "".join(f"<p>{_e(p)}</p>" for p in text.split("\n\n")) if text else ""
        return f"<h2>Turn {step.turn}</h2>{body or '<p class=meta>(tool calls only)</p>'}"
    if isinstance(step, ToolExecuted):
        return _html_call(step)
    if isinstance(step, FindingEvent):
        return _html_finding(story, step)
    if isinstance(step, ApprovalEvent):
        verdict = "approved" if step.approved else "denied"
        why = f": {step.reason}" if step.reason else ""
        return (
            f'<p class="meta">Approval: {_e(step.tool)} on <code>{_e(step.host)}</code> '
            f"{verdict} by {_e(step.by)}{_e(why)}</p>"
        )
    if isinstance(step, ErrorEvent):
        return f'<p class="bad">Error ({_e(step.where)}): {_e(step.message)}</p>'
    if isinstance(step, BudgetNotice):
        return f'<p class="warn">Budget spent: {_e(step.reason)}; the next turn was the last.</p>'
    if isinstance(step, SessionStarted):
        return f'<p class="segment">{_e(_segment_line(step, story.segment(step)))}</p>'
    return ""


def _verdict_badge(verdict: str) -> str:
    return f'<span class="verdict verdict-{_e(verdict)}">{_e(verdict.upper())}</span>'


def _html_verdicts(story: Story) -> str:
    items = [
        f"<li>{_verdict_badge(e.finding.verdict)}{_e(e.finding.claim)} "
        f'<span class="{"ok" if e.finding.grounded else "warn"}">'
        f"({_e(_grounded_mark(e.finding.grounded))})</span></li>"
        for e in _findings(story)
    ]
    listed = (
        f'<ul class="verdicts">{"".join(items)}</ul>'
        if items
        else ("<p>No findings were reported.</p>")
    )
    answer = _unsupported(story)
    shown = f'<p class="warn">{_e(answer)}</p>' if answer else ""
    return (
        f'<h2>Verdicts</h2>{listed}<h2>Summary</h2><p class="meta">{_e(_totals_line(story))}</p>'
        f"{shown}"
    )


def render_html(events: Sequence[Event], banner: str | None = None) -> str:
    """One self-contained page: inline CSS, no scripts, no external assets. The verdicts and
    the summary come first; the turns that led to them follow."""
    story = build_story(events)
    head = f'<p class="banner">{_e(banner)}</p>' if banner else ""
    title = "Sleuth investigation"
    if story.started is not None:
        s = story.started
        title = s.question[:80]
        head += (
            f'<p class="question">{_e(s.question)}</p><p class="meta">{_e(_session_line(s))}</p>'
        )
    body = "\n".join(_html_step(story, step) for step in story.steps)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>Sleuth investigation</h1>{head}\n{_html_verdicts(story)}\n"
        f"<h2>How it was found</h2>\n{body}\n</body></html>\n"
    )


# --- Terminal (rich) ------------------------------------------------------


def _fold_text(output: str) -> str:
    if not is_long(output):
        return output
    lines = output.splitlines()
    head = "\n".join(lines[:TEXT_HEAD_LINES])[:FOLD_CHARS]
    return f"{head}\n… {len(lines) - TEXT_HEAD_LINES} more lines folded (--format html shows all)"


def _rich_call(call: ToolExecuted) -> RenderableType:
    colour = "green" if call.ok and call.exit_code in (None, 0) else "red"
    cut = f" · {call.bytes_cut} bytes cut" if call.bytes_cut else ""
    where = f" on [cyan]{escape(call.host)}[/]" if call.host else ""
    title = (
        f"[bold]{escape(call.tool)}[/]{where} · "
        f"[{colour}]{escape(_status(call))}[/] · {call.duration_s:.2f} s{cut}"
    )
    body = [Text(json.dumps(call.input, ensure_ascii=False), style="dim")]
    body += [Text("$ " + line, style="yellow") for line in command_lines(call)]
    body.append(Text(_fold_text(call.output or "(no output)")))
    return Panel(Group(*body), title=title, subtitle=escape(call.call_id), title_align="left")


def _rich_finding(story: Story, event: FindingEvent) -> RenderableType:
    f = event.finding
    colour = "green" if f.grounded else "yellow"
    lines: list[RenderableType] = [
        Text.from_markup(
            f"[bold]{escape(f.verdict)}[/] · confidence {f.confidence:.2f} · "
            f"[{colour}]{escape(_grounded_mark(f.grounded))}[/]"
        )
    ]
    for ev in f.evidence:
        lines.append(
            Text.from_markup(
                f"→ call [cyan]{escape(call_label(story, ev.call_id))}[/]"
                f" ({escape(_grounded_mark(ev.grounded))}): "
            )
            + Text(ev.quote, style="italic")
        )
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
        return Rule(_segment_line(step, story.segment(step)), align="left", style="yellow")
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
        parts.append(Text(_session_line(s), "dim"))
    parts.append(Rule("Verdicts", align="left"))
    for e in _findings(story):
        colour = _VERDICT_COLOUR.get(e.finding.verdict, "white")
        parts.append(
            Text.from_markup(f"[bold {colour}]{e.finding.verdict.upper():>7}[/] ")
            + Text(f"{e.finding.claim} ({_grounded_mark(e.finding.grounded)})")
        )
    if not _findings(story):
        parts.append(Text("No findings were reported."))
    parts += [Rule("Summary", align="left"), Text(_totals_line(story))]
    if answer := _unsupported(story):
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


def render(events: Sequence[Event], fmt: str, banner: str | None = None) -> str:
    """`fmt` is one of FORMATS."""
    renderers = {
        "text": render_text,
        "md": render_markdown,
        "html": render_html,
        "json": render_json,
    }
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderers[fmt](events, banner)
