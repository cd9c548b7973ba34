"""The story as one self-contained HTML page: inline CSS, no scripts, no external assets."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from sleuth.transcripts.controls import printable_json, shown
from sleuth.transcripts.events import Event, Evidence, Finding, ToolExecuted
from sleuth.transcripts.render import phrases
from sleuth.transcripts.render.fleet import COLUMNS, fleet_of, fleet_rows, hosts_note, summary
from sleuth.transcripts.render.steps import tell
from sleuth.transcripts.render.story import Story, build_story

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
.banner-signed{background:#1a7f37}.banner-partial{background:#9a6700}
.verdicts{list-style:none;padding:0}.verdicts li{margin:.4rem 0}
.verdict{display:inline-block;min-width:4.5rem;text-align:center;font-weight:bold;
border-radius:4px;padding:0 .4rem;color:#fff;margin-right:.5rem}
.verdict-yes{background:#1a7f37}.verdict-no{background:#c62828}
.verdict-partial{background:#b26a00}.verdict-unknown{background:#6e7781}
.segment{background:#fff8e1;padding:.5rem 1rem;border-radius:6px}
summary{cursor:pointer;color:#3b6fd8}
table.fleet{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
table.fleet td,table.fleet th{border:1px solid #ddd;padding:.25rem .5rem;vertical-align:top;
text-align:left}table.fleet td pre{margin:0;padding:0;background:none}
.v-outlier,.v-failed,.v-unreachable{color:#c62828;font-weight:bold}
.v-majority,.v-largest{color:#1a7f37}
"""


def _e(text: object) -> str:
    """Text as HTML, tags and entities escaped, and every character that could reorder or hide
    what a page shows (a bidi override, a separator, a control) shown as its escape."""
    return html.escape(shown(str(text)))


def _html_fleet(story: Story, call: ToolExecuted) -> str | None:
    fleet = fleet_of(call)
    if fleet is None:
        return None
    head = "".join(f"<th>{_e(c)}</th>" for c in COLUMNS)
    rows = "".join(
        f'<tr><td>{_e(r.label)}</td><td class="v-{_e(r.verdict.split()[-1])}">{_e(r.verdict)}'
        f"</td><td>{_e(r.hosts)}</td><td>{r.count}</td><td><pre>{_e(r.excerpt)}</pre></td></tr>"
        for r in fleet_rows(fleet)
    )
    parts = story.parts.get(call.call_id, [])
    raw = "".join(
        f"<p><b>{_e(p.host)}</b> · {_e(phrases.call_status(p))}</p><pre>{_e(p.result.output)}</pre>"
        for p in parts
    )
    return (
        f'<table class="fleet"><tr>{head}</tr>{rows}</table>'
        f'<p class="meta">{_e(summary(fleet, len(parts)))}</p>'
        f"<details><summary>each host's raw output ({len(parts)})</summary>{raw}</details>"
    )


@dataclass(frozen=True)
class _Html:
    """HTML's telling of each step, as one fragment."""

    story: Story

    def turn(self, number: int, text: str) -> str:
        body = "".join(f"<p>{_e(p)}</p>" for p in text.split("\n\n")) if text else ""
        return f"<h2>Turn {number}</h2>{body or '<p class=meta>(tool calls only)</p>'}"

    def call(self, call: ToolExecuted) -> str:
        cls = "ok" if call.result.ok and call.result.exit_code in (None, 0) else "bad"
        result = call.result
        cut = f" · {result.bytes_cut} bytes cut" if result.bytes_cut else ""
        status = _e(phrases.call_status(call))
        parts = [
            f'<div class="call" id="{phrases.anchor(call.call_id)}">',
            f'<div class="call-head"><b>{_e(call.tool)}</b>'
            + (f" on <code>{_e(call.host)}</code>" if call.host else "")
            + f' · <span class="{cls}">{status}</span> · {result.duration_s:.2f} s{cut}'
            f" · call <code>{_e(call.call_id)}</code></div>",
            f"<pre>{_e(printable_json(call.input))}</pre>",
        ]
        if call.result.argv:
            parts.append(f"<pre>$ {_e(chr(10).join(phrases.command_lines(call)))}</pre>")
        output = call.result.output or "(no output)"
        fleet = _html_fleet(self.story, call)
        if fleet is not None:
            parts.append(fleet)
        elif phrases.is_long(output):
            count = output.count("\n") + 1
            parts.append(
                f"<details><summary>output ({count} lines)</summary><pre>{_e(output)}</pre>"
                "</details>"
            )
        else:
            parts.append(f"<pre>{_e(output)}</pre>")
        return "\n".join([*parts, "</div>"])

    def finding(self, f: Finding) -> str:
        mark_cls = "ok" if f.grounded else "warn"
        items = []
        for ev in f.evidence:
            ev_cls = "ok" if ev.grounded else "warn"
            items.append(
                f'<li><a href="#{phrases.anchor(ev.call_id)}">'
                f"{_e(self.story.call_label(ev.call_id))}</a>"
                f' {_e(hosts_note(ev))}<span class="{ev_cls}">'
                f"{_e(phrases.evidence_head(ev))}</span>"
                f"<pre>{_e(ev.shown)}</pre>{_note(ev)}</li>"
            )
        steps = "".join(f"<li>{_e(step)}</li>" for step in f.next_steps)
        return (
            f'<div class="finding"><h3>{_e(f.claim)}</h3>'
            f"<p>{_verdict_badge(f.verdict)} confidence {f.confidence:.2f} · "
            f'<span class="{mark_cls}">{_e(phrases.grounded_mark(f.grounded))}</span></p>'
            f"<ul>{''.join(items)}</ul>"
            + (f"<p>Next steps:</p><ul>{steps}</ul>" if steps else "")
            + "</div>"
        )

    def approval(self, tool: str, host: str, outcome: str) -> str:
        return f'<p class="meta">Approval: {_e(tool)} on <code>{_e(host)}</code> {_e(outcome)}</p>'

    def error(self, where: str, message: str) -> str:
        return f'<p class="bad">Error ({_e(where)}): {_e(message)}</p>'

    def budget(self, reason: str) -> str:
        return f'<p class="warn">Budget spent: {_e(reason)}; the next turn was the last.</p>'

    def segment(self, line: str) -> str:
        return f'<p class="segment">{_e(line)}</p>'


def _verdict_badge(verdict: str) -> str:
    return f'<span class="verdict verdict-{_e(verdict)}">{_e(verdict.upper())}</span>'


def _html_verdicts(story: Story) -> str:
    items = [
        f"<li>{_verdict_badge(f.verdict)}{_e(f.claim)} "
        f'<span class="{"ok" if f.grounded else "warn"}">'
        f"({_e(phrases.grounded_mark(f.grounded))})</span></li>"
        for f in story.findings()
    ]
    listed = (
        f'<ul class="verdicts">{"".join(items)}</ul>'
        if items
        else ("<p>No findings were reported.</p>")
    )
    answer = story.unsupported_answer()
    shown = f'<p class="warn">{_e(answer)}</p>' if answer else ""
    return (
        f'<h2>Verdicts</h2>{listed}<h2>Summary</h2><p class="meta">{_e(story.totals_line())}</p>'
        f"{shown}"
    )


def render_html(events: Sequence[Event], banner: phrases.Banner | None = None) -> str:
    """One self-contained page: inline CSS, no scripts, no external assets. The verdicts and
    the summary come first; the turns that led to them follow."""
    story = build_story(events)
    head = f'<p class="banner banner-{banner.level}">{_e(banner.text)}</p>' if banner else ""
    title = "Sleuth investigation"
    if story.started is not None:
        s = story.started
        title = s.question[:80]
        head += (
            f'<p class="question">{_e(s.question)}</p>'
            f'<p class="meta">{_e(phrases.session_line(s))}</p>'
        )
    body = "\n".join(told or "" for told in tell(story, _Html(story)))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>Sleuth investigation</h1>{head}\n{_html_verdicts(story)}\n"
        f"<h2>How it was found</h2>\n{body}\n</body></html>\n"
    )


def _note(ev: Evidence) -> str:
    note = phrases.evidence_note(ev)
    return f'<p class="note">{_e(note)}</p>' if note else ""
