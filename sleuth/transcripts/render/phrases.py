"""The phrases every format shares (a call's status and command lines, grounding marks,
evidence heads, the session line), so they agree on what is shown; each format adds its own
markup around them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sleuth.transcripts.events import Evidence, SessionStarted, ToolExecuted
from sleuth.transcripts.verify import Verdict, VerifyReport

FOLD_LINES = 20
"""Outputs longer than this many lines (or FOLD_CHARS) are folded."""
FOLD_CHARS = 2000


@dataclass(frozen=True)
class Banner:
    """The verdict a reader puts first: `sleuth verify`'s headline and verdict, unchanged."""

    text: str
    verdict: Verdict

    @classmethod
    def of(cls, report: VerifyReport) -> Banner:
        return cls(report.headline, report.verdict)

    @property
    def level(self) -> str:
        """signed (a whole signed run), partial (intact, short of that), failed."""
        return {"signed": "signed", "failed": "failed"}.get(self.verdict, "partial")


def command_lines(call: ToolExecuted) -> list[str]:
    return [" ".join(_shell_word(word) for word in argv) for argv in call.result.argv]


def _shell_word(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_./:=@%+,-]+", word) else json.dumps(word)


def is_long(text: str) -> bool:
    return text.count("\n") >= FOLD_LINES or len(text) > FOLD_CHARS


def anchor(call_id: str) -> str:
    return "call-" + re.sub(r"[^A-Za-z0-9_-]", "-", call_id)


def tool_where(call: ToolExecuted) -> str:
    """`grep on gpu1`; report_finding runs on no host, so it says none."""
    return f"{call.tool} on {call.host}" if call.host else call.tool


def segment_line(s: SessionStarted, number: int) -> str:
    return f"resumed here (segment {number}) from {s.resumed_from} · {session_line(s)}"


def call_status(call: ToolExecuted) -> str:
    if not call.result.ok:
        return "failed"
    return "ok" if call.result.exit_code in (None, 0) else f"exit {call.result.exit_code}"


def session_line(s: SessionStarted) -> str:
    hosts = ", ".join(
        f"{h.name} ({h.address})" if h.address and h.address != h.name else h.name for h in s.hosts
    )
    hosts = hosts or "none"
    model = f" ({s.model})" if s.model else ""
    return f"session {s.session_id} · brain {s.brain}{model} · hosts {hosts}"


def grounded_mark(grounded: bool | None) -> str:
    return {True: "✓ grounded", False: "✗ not grounded", None: "unchecked"}[grounded]


def evidence_head(ev: Evidence) -> str:
    """`lines 12-14 · ✓ grounded`, or `✗ not grounded: cut_in_word (line 3)`."""
    mark = grounded_mark(ev.grounded)
    if ev.failure is not None:
        mark += f": {ev.failure}" + (f" (line {ev.line})" if ev.line is not None else "")
    return f"lines {ev.lines} · {mark}" if ev.lines else mark


def evidence_note(ev: Evidence) -> str | None:
    """For a quote cut inside a word: what it was grounded on once trimmed."""
    if ev.lines or ev.text is None:
        return None
    return f"cut inside a word; grounded on: {ev.text}"
