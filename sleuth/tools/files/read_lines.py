"""read_lines: numbered lines of a text file, like `sed -n 'START,ENDp'`, secrets redacted.

The range is read beneath the host's roots by `sandbox.files` (Sleuth's host program, or a
fixed `cut | sed` script whose path and numbers arrive as positional parameters).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.tools.context import ToolContext
from sleuth.tools.files.failure import command_failure
from sleuth.tools.files.keyed_secrets import scan_paths, too_big
from sleuth.tools.files.names import shown_name
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_lines
from sleuth.transcripts.redact import clean_cut, redact
from sleuth.transcripts.results import ToolResult

LINE_BYTES = 4096


class ReadLinesInput(ToolInput):
    path: str = Field(description="File to read; relative paths start at the host's first root.")
    start: int = Field(1, ge=1, description="First line to show (1-based).")
    end: int | None = Field(None, ge=1, description="Last line to show; default start+199.")


class LinesRead(BaseModel):
    """read_lines' data: which lines were shown whole, of how many in the file."""

    path: str
    start: int
    end: int
    total_lines: int


def _show_line(line: str, length: int) -> str:
    """A line of `length` bytes as shown: past LINE_BYTES it is cut, without the word the
    cut went through (the line arrives redacted, but a secret cut short is not recognised)."""
    if length <= LINE_BYTES:
        return line
    kept = clean_cut(line.encode()[:LINE_BYTES].decode(errors="ignore"))
    return f"{kept} [line cut: {len(kept.encode())} of its first {LINE_BYTES} bytes shown]"


@tool()
def read_lines(ctx: ToolContext, args: ReadLinesInput) -> ToolResult:
    """Read numbered lines START..END of a text file, like `sed -n 'START,ENDp'`.

    Use it to look at source code or logs around a line you found with grep.
    The output shows each line with its number and ends with the file's total
    line count, so you can page on. Very long lines or ranges are cut with an
    explicit "[truncated: N more bytes in M more lines]" marker.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path)
    limit = ctx.limits.max_output_lines
    end = args.end or args.start + min(199, limit - 1)
    if end < args.start:
        raise ToolError(f"end ({end}) is before start ({args.start})")
    note = ""
    if end - args.start + 1 > limit:
        end = args.start + limit - 1
        note = f"(range shortened to {limit} lines, the per-call limit)\n"
    if b"\x00" in sandbox.files.read_range(path, 0, 8192):
        raise ToolError(
            f"{shown_name(path)} is binary (NUL bytes in its first 8 KiB); read_lines shows "
            "text. For a .safetensors file use safetensors_header."
        )
    got = sandbox.files.read_lines(path, args.start, end, LINE_BYTES + 1)
    if got.timed_out or got.exit_code != 0 or got.stderr.strip():
        raise ToolError(command_failure(got.stderr, got.exit_code, got.timed_out, path))
    keyed = scan_paths(sandbox, [path], ctx.limits.timeout_s).get(path, {})
    if keyed is None:
        raise too_big(path)
    shown_lines = [
        keyed[n] if n in keyed else redact(line.decode(errors="replace"))
        for n, line in enumerate(got.lines, args.start)
    ]
    body = "".join(
        f"{n:>6}\t{_show_line(text, len(line))}\n"
        for n, (text, line) in enumerate(zip(shown_lines, got.lines, strict=True), args.start)
    )
    last = args.start + len(got.lines) - 1
    head = f"{shown_name(path)} lines {args.start}-{{}} of {got.total}\n"
    # The header's numbers only shrink once the body is cut, so its longest form is kept free.
    capped = cap_lines(
        body,
        ctx.limits.max_output_bytes - len(head.format(last).encode() + note.encode()),
        limit,
        got.stdout_cut,
        max(0, min(end, got.total) - last),
    )
    shown_end = args.start + capped.whole_lines - 1
    shown = LinesRead(path=path, start=args.start, end=shown_end, total_lines=got.total)
    return ToolResult(
        ok=True,
        output=head.format(shown_end) + note + capped.text,
        data=shown.model_dump(mode="json"),
        argv=[got.argv, *([got.count_argv] if got.count_argv else [])],
        exit_code=0,
        bytes_cut=capped.cut,
        reconnected=got.reconnected,
    )
