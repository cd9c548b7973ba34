"""grep: search file contents recursively, secrets redacted before matching.

Files are searched beneath the host's roots by `sandbox.files.grep` (the host's own grep,
with `-e` before the pattern and `--` before the path), so nothing the model writes is
parsed as an option or by a shell.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.tools.context import ToolContext
from sleuth.tools.files import redacted_grep
from sleuth.tools.files.names import shown_name
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import cap_output
from sleuth.transcripts.results import ToolResult


class GrepInput(ToolInput):
    pattern: str = Field(
        min_length=1, description="Extended regular expression (or a fixed string)."
    )
    path: str = Field(description="File or folder to search, recursively.")
    fixed_string: bool = Field(False, description="Match the pattern literally.")
    ignore_case: bool = False
    include_glob: str | None = Field(None, description="Only files matching, e.g. '*.py'.")
    context: int = Field(0, ge=0, le=20, description="Lines of context around each match.")
    max_matches: int = Field(200, ge=1, le=5000, description="Stop after this many per file.")


class GrepMatches(BaseModel):
    """grep's data: how many lines matched, in which files, and what was left out."""

    matches: int
    files: list[str]
    complete: bool
    redacted_lines_unmatched: int
    not_searched: list[str]


@tool()
def grep(ctx: ToolContext, args: GrepInput) -> ToolResult:
    """Search file contents recursively and return `file:line:text` for each match.

    Use it to find where a flag, class or string is defined or used in a source
    tree (e.g. pattern "speculative_algorithm", include_glob "*.py"). Binary
    files are skipped and symlinks inside folders are not followed. Secrets are
    redacted before matching: a line matches only if the pattern matches what is
    shown, so searching for a secret's content finds nothing. The output ends with
    the number of matching lines and files; if it was cut, it says so.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path, folder=True)
    flags = ["-F" if args.fixed_string else "-E", *(["-i"] if args.ignore_case else [])]
    found = redacted_grep.search(
        sandbox, path, flags, args.include_glob, args.pattern, args.max_matches,
        ctx.limits.timeout_s,
    )  # fmt: skip
    context = (
        redacted_grep.context_lines(sandbox, found, args.context, ctx.limits.timeout_s)
        if args.context
        else {}
    )
    lines = _grep_lines(found.matches, context)
    files = sorted({name for name, _, _ in found.matches})
    at_least = "at least " if found.raw_cut else ""
    summary = f"{at_least}{len(found.matches)} matching lines in {at_least}{len(files)} files"
    if not found.matches:
        summary = f"no matches for {args.pattern!r} under {shown_name(path)}"
    if found.unscanned:
        summary += "; not searched, too big to check for secrets by key: " + ", ".join(
            shown_name(name) for name in found.unscanned
        )
    if found.hidden:
        summary += (
            f"; {found.hidden} lines with redacted values did not match once redacted "
            "(a match inside a redacted value is not shown)"
        )
    text, cut = cap_output(
        "".join(line + "\n" for line in lines),
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines,
        found.raw_cut,
    )
    matched = GrepMatches(
        matches=len(found.matches),
        files=files,
        complete=not cut,
        redacted_lines_unmatched=found.hidden,
        not_searched=found.unscanned,
    )
    return ToolResult(
        ok=True,
        output=f"{text}{summary}\n",
        data=matched.model_dump(mode="json"),
        argv=found.argv,
        exit_code=0 if found.matches else 1,
        bytes_cut=cut,
    )


def _grep_lines(
    matches: list[tuple[str, int, str]], context: dict[tuple[str, int], str]
) -> list[str]:
    """grep's own layout: `file:N:text` for a match, `file-N-text` around it, `--` between."""
    shown: dict[tuple[str, int], str] = {
        **{hit: f"{shown_name(hit[0])}-{hit[1]}-{text}" for hit, text in context.items()},
        **{(name, n): f"{shown_name(name)}:{n}:{text}" for name, n, text in matches},
    }
    lines: list[str] = []
    last: tuple[str, int] | None = None
    for hit in sorted(shown):
        if context and last is not None and (hit[0] != last[0] or hit[1] != last[1] + 1):
            lines.append("--")
        lines.append(shown[hit])
        last = hit
    return lines
