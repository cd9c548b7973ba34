"""The live view of a run (tool calls as they go, tokens, cache hits, cost, retries) and the
findings table printed at the end.

```python
with LiveView(console) as view:
    result = start_investigation(..., observer=view).run()
console.print(findings_table(result.findings))
```
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape as escape_markup
from rich.table import Table
from rich.text import Text

from sleuth.agent.protocols import BrainReply
from sleuth.transcripts.controls import shown
from sleuth.transcripts.events import Finding, Retry, Usage

SHOWN_CALLS = 12


def escape(text: str) -> str:
    """Model or host text inside markup: its markup and control characters escaped."""
    return escape_markup(shown(text))


@dataclass
class _Call:
    tool: str
    host: str
    summary: str
    started: float
    ok: bool | None = None
    duration_s: float = 0.0


class LiveView:
    """An Observer drawing on a rich Live display; safe to call from tool threads."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._lock = threading.Lock()
        self._calls: dict[str, _Call] = {}
        self._usage = Usage()
        self._cost, self._turn, self._retries = 0.0, 0, 0
        self._notes: list[str] = []
        self._live = Live(
            console=console, refresh_per_second=8, transient=False, get_renderable=self._render
        )

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._live.stop()
        if not self.console.is_terminal:
            # rich ends the view with a newline only on a terminal; in a log or a pipe its last
            # line would run into whatever is printed next.
            self.console.line()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop drawing (a prompt needs the terminal to itself), then go on below it."""
        drawing = self._live.is_started
        self._live.stop()
        try:
            yield
        finally:
            if drawing:
                self._live.start()

    def turn_started(self, turn: int) -> None:
        with self._lock:
            self._turn = turn

    def turn_ended(self, turn: int, reply: BrainReply, cost_usd: float) -> None:
        with self._lock:
            u, r = self._usage, reply.usage
            u.input_tokens += r.input_tokens
            u.output_tokens += r.output_tokens
            u.cache_read_tokens += r.cache_read_tokens
            u.cache_write_tokens += r.cache_write_tokens
            self._cost += cost_usd
            for block in reply.response.content:
                if block.type == "text" and block.text and block.text.strip():
                    first = block.text.strip().splitlines()[0]
                    self._notes.append(first if not self.console.is_terminal else _short(first))

    def retry(self, retry: Retry) -> None:
        with self._lock:
            self._retries += 1
            self._notes.append(
                f"retry {retry.attempt}: {retry.reason} (after {retry.wait_s:.1f} s)"
            )

    def tool_started(self, call_id: str, tool: str, host: str, summary: str) -> None:
        with self._lock:
            shown = _short(summary, 80) if self.console.is_terminal else summary
            self._calls[call_id] = _Call(tool, host, shown, time.monotonic())

    def tool_ended(self, call_id: str, ok: bool, duration_s: float) -> None:
        with self._lock:
            call = self._calls.get(call_id)
            if call:
                call.ok, call.duration_s = ok, duration_s

    def note(self, text: str) -> None:
        with self._lock:
            self._notes.append(text)

    def _render(self) -> RenderableType:
        with self._lock:
            calls = list(self._calls.values())[-SHOWN_CALLS:]
            notes = self._notes[-3:]
            u = self._usage
            status = Text.assemble(
                (f"turn {self._turn}", "bold"),
                f"  tokens in {u.input_tokens:,} out {u.output_tokens:,}",
                f"  cache read {u.cache_read_tokens:,} write {u.cache_write_tokens:,}",
                f"  cost ${self._cost:.4f}",
                (f"  retries {self._retries}", "yellow" if self._retries else ""),
            )
        table = Table(box=None, show_header=False, pad_edge=False)
        for column in ("", "host", "tool", "input", "time"):
            table.add_column(column, no_wrap=column != "input", overflow="ellipsis")
        now = time.monotonic()
        for c in calls:
            mark = {None: "[cyan]…[/]", True: "[green]✓[/]", False: "[red]✗[/]"}[c.ok]
            took = c.duration_s if c.ok is not None else now - c.started
            table.add_row(mark, escape(c.host), escape(c.tool), escape(c.summary), f"{took:.2f}s")
        return Group(*(Text(shown(n), style="dim") for n in notes), table, status)


def findings_table(findings: list[Finding], piped: bool = False) -> Table:
    """The findings, one row each. `piped`: sized to its text and no quote shortened, for
    output that is not a terminal and so has no width to fit."""
    table = Table(title="Findings", show_lines=True, expand=not piped)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("claim", ratio=2)
    table.add_column("evidence", ratio=3)
    colours = {"yes": "green", "no": "red", "partial": "yellow", "unknown": "dim"}
    for i, f in enumerate(findings, 1):
        verdict = f"[{colours[f.verdict]}]{f.verdict}[/] {f.confidence:.0%}"
        if not f.grounded:
            verdict += "\n[bold red]ungrounded[/]"
        evidence = "\n".join(
            f"{'[green]✓[/]' if e.grounded else '[red]✗[/]'} {escape(e.call_id)}"
            f"{escape(' [' + ', '.join(e.hosts) + ']') if e.hosts else ''}"
            f"{escape(f' lines {e.lines}' if e.lines else '')}: "
            f"{escape(' '.join(e.shown.split()) if piped else _short(e.shown))}"
            for e in f.evidence
        )
        steps = "".join(f"\n[dim]next: {escape(s)}[/]" for s in f.next_steps)
        table.add_row(str(i), verdict, escape(f.claim) + steps, evidence)
    return table


def _short(quote: str, limit: int = 160) -> str:
    flat = " ".join(quote.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
