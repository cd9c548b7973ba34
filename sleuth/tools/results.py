"""How a tool's output is capped. The result itself is `sleuth.transcripts.results.ToolResult`."""

from __future__ import annotations

from sleuth.errors import ToolError as ToolError  # its home for most callers


def truncation_notice(cut: int) -> str:
    return f"[truncated: {cut} more bytes]"


def cap_output(text: str, max_bytes: int, max_lines: int, already_cut: int = 0) -> tuple[str, int]:
    """Cap `text` to `max_lines` lines and `max_bytes` UTF-8 bytes, marking any cut.

    `already_cut` counts bytes the host dropped before we saw them. Returns the
    capped text and the total bytes cut.
    """
    lines = text.splitlines(keepends=True)
    cut = already_cut
    if len(lines) > max_lines:
        cut += sum(len(line.encode()) for line in lines[max_lines:])
        lines = lines[:max_lines]
    kept = "".join(lines)
    raw = kept.encode()
    if len(raw) > max_bytes:
        cut += len(raw) - max_bytes
        kept = raw[:max_bytes].decode(errors="ignore")
    if cut:
        if kept and not kept.endswith("\n"):
            kept += "\n"
        kept += truncation_notice(cut)
    return kept, cut
