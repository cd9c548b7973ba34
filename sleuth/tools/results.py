"""How a tool's output is capped. The result itself is `sleuth.transcripts.results.ToolResult`."""

from __future__ import annotations

from typing import NamedTuple

from sleuth.errors import ToolError as ToolError  # its home for most callers
from sleuth.transcripts.redact import clean_cut, redact


class Capped(NamedTuple):
    """Output after `cap_lines`: the text shown (notice included), the bytes cut, and how
    many of the text's lines are shown whole."""

    text: str
    cut: int
    whole_lines: int


def truncation_notice(cut: int, lines: int | None, partial: bool) -> str:
    """What a cut left out: "[truncated: 5120 more bytes in 40 more lines]"; `lines` is
    None where a host's cap dropped lines nobody counted (then the count is a floor)."""
    if lines is None:
        return f"[truncated: {cut} more bytes, lines not counted]"
    counted = f"{lines} more line{'' if lines == 1 else 's'}"
    if partial:
        counted += ", the first of them in part"
    return f"[truncated: {cut} more bytes in {counted}]"


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def cap_lines(
    text: str, max_bytes: int, max_lines: int, host_cut: int = 0, host_lines: int | None = None
) -> Capped:
    """Redact `text`, then cap it to `max_lines` lines and `max_bytes` UTF-8 bytes, saying
    exactly how many bytes and lines were cut.

    Redaction comes first, over the whole text, since a secret cut in two no longer has
    the shape that redaction recognises; and a line cut short loses the word the cut went
    through (`clean_cut`). `host_cut` counts bytes a host's cap dropped after the end of
    `text`, in `host_lines` more lines when the caller knows how many (else the notice
    says the lines were not counted).
    """
    text = redact(text)
    end = -1
    for _ in range(max_lines):
        end = text.find("\n", end + 1)
        if end < 0:
            break
    kept = text if end < 0 else text[: end + 1]
    raw = kept.encode()
    if len(raw) > max_bytes:
        kept = raw[:max_bytes].decode(errors="ignore")
    if (len(kept) < len(text) or host_cut) and not kept.endswith("\n"):
        kept = clean_cut(kept)
    whole = kept.count("\n")
    cut = len(text.encode()) - len(kept.encode()) + host_cut
    if not cut:
        return Capped(kept, 0, whole)
    in_part = bool(kept) and not kept.endswith("\n")
    lines = None
    if not host_cut or host_lines is not None:
        lines = _line_count(text) - whole + (host_lines or 0)
    notice = truncation_notice(cut, lines, in_part)
    return Capped(kept + ("\n" if in_part else "") + notice, cut, whole)


def cap_output(text: str, max_bytes: int, max_lines: int, host_cut: int = 0) -> tuple[str, int]:
    """`cap_lines`' text and bytes cut."""
    capped = cap_lines(text, max_bytes, max_lines, host_cut)
    return capped.text, capped.cut
