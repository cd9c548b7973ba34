"""list_dir: a folder's entries (type, size, name) DEPTH levels down, links not followed."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.hosts.replies import DirEntry
from sleuth.tools.context import ToolContext
from sleuth.tools.files.failure import command_failure
from sleuth.tools.files.names import shown_name
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


class ListDirInput(ToolInput):
    path: str = Field(".", description="Folder to list; relative to the host's first root.")
    depth: int = Field(1, ge=1, le=6, description="How many levels down to go.")
    max_entries: int = Field(500, ge=1, le=20_000)


class DirListing(BaseModel):
    """list_dir's data: the entries shown, in name order, and whether that was all of them."""

    path: str
    entries: list[DirEntry]
    complete: bool


@tool()
def list_dir(ctx: ToolContext, args: ListDirInput) -> ToolResult:
    """List a folder: the type, size in bytes and name of each entry, DEPTH levels down.

    Use it to find checkpoints (config.json, *.safetensors), source trees and
    logs. Symlinks are shown as links, not followed.
    """
    sandbox = ctx.host(args.host)
    path = sandbox.resolve(args.path, folder=True)
    run = sandbox.files.list_dir(path, args.depth)
    if run.timed_out or run.exit_code not in (0, 1):
        raise ToolError(command_failure(run.stderr, run.exit_code, run.timed_out, path))
    entries = list(run.entries)
    seen = len(entries)
    entries.sort(key=lambda e: e.name)
    shown = entries[: args.max_entries]
    more = seen - len(shown)
    body = "".join(
        f"{e.kind:<6} {e.size:>14} {shown_name(e.name)}{'/' if e.kind == 'dir' else ''}\n"
        for e in shown
    )
    tail = ""
    if more or run.stdout_cut:
        tail = f"[truncated: {more} more entries{' and more not read' if run.stdout_cut else ''}]\n"
    text, cut = cap_output(
        f"{shown_name(path)}: {seen} entries\n{body}",
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines + 1,
    )
    listing = DirListing(path=path, entries=shown, complete=not (more or run.stdout_cut))
    return ToolResult(
        ok=True,
        output=text + tail,
        data=listing.model_dump(mode="json"),
        argv=[run.argv],
        exit_code=run.exit_code,
        bytes_cut=cut + run.stdout_cut,
        reconnected=run.reconnected,
    )
