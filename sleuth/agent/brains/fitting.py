"""Fitting a request into a served context: how many tokens a prompt takes, how much room
an answer needs, and when a context is small enough for the compact prompt."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

COMPACT_BELOW = 16_384
"""A served context (tokens) below this gets the compact prompt: the full one is ~6k tokens."""
CHARS_PER_TOKEN = 3.0
MIN_ROOM = 32
"""Fewer output tokens than this cannot hold a tool call: the context is full."""
WANTED_ROOM = 512
"""Room for a call or a short answer; with less, the compact prompt offers only the readers."""


def prompt_chars(body: Mapping[str, Any]) -> int:
    """The characters of a chat-completions body that count towards its prompt."""
    return len(json.dumps(body["messages"], ensure_ascii=False)) + len(
        json.dumps(body.get("tools") or [], ensure_ascii=False)
    )


def prompt_tokens(chars: int, counted: tuple[int, int] | None) -> int:
    """A prompt of `chars` characters in tokens, estimated on the high side: tokenizers give
    3.5-4.5 characters a token on this text, the chat template adds some. `counted` is
    (characters, tokens) of an earlier prompt of this conversation as the server counted it:
    that count stands and only what was added since is estimated. On SmolLM2 at a 2,048-token
    context the whole-prompt estimate (18% high) left no room for a second turn that fit."""
    if counted is None or chars < counted[0]:
        return math.ceil(chars / CHARS_PER_TOKEN * 1.1) + 64
    counted_chars, counted_tokens = counted
    return counted_tokens + math.ceil((chars - counted_chars) / CHARS_PER_TOKEN * 1.1) + 16
