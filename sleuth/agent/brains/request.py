"""What every provider does to a turn's request: its output-token limit and its hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sleuth.agent.protocols import Request

MAX_OUTPUT_TOKENS = 64_000
"""The most a raised per-turn limit asks for: the largest output current models allow."""


def request_hash(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def raised_limit(base: int, request: Request, ceiling: int) -> int:
    """This turn's output-token limit: doubled (once) after a cut-off reply, within the
    model's ceiling and what the output budget has left, never below the usual limit."""
    if not request.more_room:
        return base
    raised = min(base * 2, max(base, ceiling))
    if request.max_output is not None:
        raised = min(raised, max(base, request.max_output))
    return raised
