"""Trace and span ids derived from the transcript, so exporting a run twice (or live, then
from its file) gives the same ids; and the W3C `traceparent` header that carries them.

    trace_id("ab12cd34ef56")                       # the run's trace
    span_id("ab12cd34ef56", "call", "toolu_01")    # a call's span, known before it runs
"""

from __future__ import annotations

import hashlib
import re

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def _derived(text: str, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1  # zero means "invalid" in W3C trace context


def trace_id(session_id: str) -> int:
    """The trace of a run: every segment of a resumed transcript shares its session id."""
    return _derived(f"sleuth/trace/{session_id}", 16)


def span_id(session_id: str, *where: object) -> int:
    """A span of the run: ("segment", seq), ("turn", seq) or ("call", call id)."""
    return _derived("/".join(["sleuth/span", session_id, *map(str, where)]), 8)


def traceparent(trace: int, span: int) -> str:
    """The W3C header value naming a sampled span."""
    return f"00-{trace:032x}-{span:016x}-01"


def parse_traceparent(text: str) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a W3C traceparent, or None for one that is not valid."""
    m = _TRACEPARENT.fullmatch(text.strip().lower())
    if m is None or m.group(1) == "ff" or (m.group(1) == "00" and m.group(5)):
        return None
    trace, span = int(m.group(2), 16), int(m.group(3), 16)
    if not trace or not span:
        return None
    return trace, span, int(m.group(4), 16)
