"""read_lines: numbered lines of a text file, like `sed -n 'START,ENDp'`, secrets redacted.

The range is read beneath the host's roots by `sandbox.files` (Sleuth's host program, or a
fixed `cut | sed` script whose path and numbers arrive as positional parameters).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.tools.context import ToolContext
from sleuth.tools.files.failure import command_failure
from sleuth.tools.files.keyed_secrets import scan_paths, too_big
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, ToolResult, cap_output

LINE_BYTES = 4096


class ReadLinesInput(ToolInput):
    path: str = Field(description="File to read; relative paths start at the host's first root.")
    start: int = Field(1, ge=1, description="First line to show (1-based).")
    end: int | None = Field(None, ge=1, description="Last line to show; default start+199.")


class LinesRead(BaseModel):
    """read_lines' data: which lines were shown, of how many (None when the count was cut)."""

    path: str
    start: int
    end: int
    total_lines: int | None


def _show_line(raw: bytes) -> str:
    if len(raw) > LINE_BYTES:
        return raw[:LINE_BYTES].decode(errors="replace") + f" [line cut at {LINE_BYTES} bytes]"
    return raw.decode(errors="replace")


@tool()
def read_lines(ctx: ToolContext, args: ReadLinesInput) -> ToolResult:
    """Read numbered lines START..END of a text file, like `sed -n 'START,ENDp'`.

    Use it to look at source code or logs around a line you found with grep.
    The output shows each line with its number and ends with the file's total
    line count, so you can page on. Very long lines or ranges are cut with an
    explicit "[truncated: N more bytes]" marker.
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
            f"{path} is binary (NUL bytes in its first 8 KiB); read_lines shows text. "
            "For a .safetensors file use safetensors_header."
        )
    run = sandbox.files.read_lines(path, args.start, end, LINE_BYTES + 1)
    if run.timed_out or run.exit_code != 0 or run.stderr.strip():
        raise ToolError(command_failure(run.stderr, run.exit_code, run.timed_out, path))
    raw_lines, total = run.lines, run.total
    keyed = scan_paths(sandbox, [path], ctx.limits.timeout_s).get(path, {})
    if keyed is None:
        raise too_big(path)
    raw_lines = [
        keyed[n].encode() if n in keyed else line for n, line in enumerate(raw_lines, args.start)
    ]
    body = "".join(f"{args.start + i:>6}\t{_show_line(line)}\n" for i, line in enumerate(raw_lines))
    shown_end = args.start + len(raw_lines) - 1
    if total is None and not run.stdout_cut:
        total = 0
    head = f"{path} lines {args.start}-{shown_end} of {total if total is not None else '?'}\n"
    text, cut = cap_output(
        head + note + body, ctx.limits.max_output_bytes, limit + 2, run.stdout_cut
    )
    shown = LinesRead(path=path, start=args.start, end=shown_end, total_lines=total)
    return ToolResult(
        ok=True,
        output=text,
        data=shown.model_dump(mode="json"),
        argv=[run.argv],
        exit_code=run.exit_code,
        bytes_cut=cut,
        reconnected=run.reconnected,
    )
