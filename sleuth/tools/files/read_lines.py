"""read_lines: numbered lines of a text file, like `sed -n 'START,ENDp'`, secrets redacted.

The range is read by a fixed script whose path and numbers arrive as positional
parameters, never as code.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.files.failure import command_failure
from sleuth.tools.files.keyed_secrets import scan_paths, too_big
from sleuth.tools.files.names import shown_name
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_lines
from sleuth.transcripts.redact import clean_cut, redact
from sleuth.transcripts.results import ToolResult

LINE_BYTES = 4096
# `cut` streams, so a file of one enormous line costs no memory, where `sed` alone would hold it.
READ_LINES_SCRIPT = 'cut -b "1-$1" -- "$2" | sed -n -e "$3,$4p" -e "\\$="'
COUNT_SCRIPT = 'cut -b 1-1 -- "$1" | wc -l'


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
    if b"\x00" in sandbox.host.read_range(path, 0, 8192):
        raise ToolError(
            f"{shown_name(path)} is binary (NUL bytes in its first 8 KiB); read_lines shows "
            "text. For a .safetensors file use safetensors_header."
        )
    got = _read_range(sandbox, path, args.start, end)
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
        got.host_cut,
        max(0, min(end, got.total) - last),
    )
    shown_end = args.start + capped.whole_lines - 1
    shown = LinesRead(path=path, start=args.start, end=shown_end, total_lines=got.total)
    return ToolResult(
        ok=True,
        output=head.format(shown_end) + note + capped.text,
        data=shown.model_dump(mode="json"),
        argv=got.argv,
        exit_code=0,
        bytes_cut=capped.cut,
        reconnected=got.reconnected,
    )


@dataclass(frozen=True)
class _Range:
    lines: list[bytes]
    """Each whole line read, cut at LINE_BYTES + 1 bytes by the host."""
    total: int
    host_cut: int
    """Bytes the host's output cap dropped after `lines`."""
    argv: list[list[str]]
    reconnected: bool


def _read_range(sandbox: SandboxedHost, path: str, start: int, end: int) -> _Range:
    """Lines START..END, and the file's line count: the script prints it last, so when the
    host's output cap cut it off, a second, streaming count (`cut -b 1-1 | wc -l`, each line
    one byte) supplies it."""
    limits = [str(LINE_BYTES + 1), path, str(start), str(end)]
    run = sandbox.run(["sh", "-c", READ_LINES_SCRIPT, "sleuth-read-lines", *limits])
    if run.timed_out or run.exit_code != 0 or run.stderr.strip():
        raise ToolError(command_failure(run.stderr, run.exit_code, run.timed_out, path))
    whole = run.stdout[: run.stdout.rfind(b"\n") + 1]
    lines = whole.split(b"\n")[:-1]
    argv = [run.argv]
    if not run.stdout_cut:
        total = int(lines.pop()) if lines and lines[-1].isdigit() else 0
        return _Range(lines, total, 0, argv, run.reconnected)
    count = sandbox.run(["sh", "-c", COUNT_SCRIPT, "sleuth-count-lines", path])
    if count.timed_out or count.exit_code != 0 or not count.stdout.strip().isdigit():
        raise ToolError(command_failure(count.stderr, count.exit_code, count.timed_out, path))
    argv.append(count.argv)
    host_cut = run.stdout_cut + len(run.stdout) - len(whole)
    return _Range(lines, int(count.stdout), host_cut, argv, run.reconnected or count.reconnected)
