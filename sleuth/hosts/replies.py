"""What the file reads beneath a sandbox's roots return, whichever way they ran.

Each is a RunResult (what ran, exit code, stderr, timed out, reconnected) with its data
parsed: the same whether Sleuth's program answered a request or a POSIX tool ran. For a
request, `argv` names it (`["sleuth-program", OP, PATH, ...]`), and `stdout_cut` counts the
bytes past the cap that the POSIX tool's output would have held, so both paths cut alike.
Names are text as the host holds them (bytes that are not UTF-8 replaced), never quoted:
the tools quote an odd name only when they print it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sleuth.hosts.host import RunResult

EntryKind = Literal["dir", "file", "link", "fifo", "socket", "other"]
FIND_KINDS: dict[str, EntryKind] = {
    "d": "dir", "f": "file", "l": "link", "p": "fifo", "s": "socket"
}  # fmt: skip
"""find's %y letters; the rest (devices, unknown) are "other"."""


class LineRange(RunResult):
    """`read_lines`: the lines START..END, each cut at the width asked, whole lines only, and
    the file's line count. `stdout_cut` counts every byte the cap dropped after `lines`: a
    line cut in part, the lines after it and the count line."""

    lines: list[bytes] = Field(default_factory=list)
    total: int = 0
    """The file's line count, whether or not the cap cut the lines."""
    count_argv: list[str] | None = None
    """The command that counted the lines, where the cap cut off the first one's count."""


class DirEntry(BaseModel):
    kind: EntryKind
    size: int
    name: str
    """Relative to the folder listed."""


class Listing(RunResult):
    """`list_dir`: the entries DEPTH levels down, links not followed, in the host's order."""

    entries: list[DirEntry] = Field(default_factory=list)


Match = tuple[str, int, str]
"""(file, line number, text)."""


class GrepRun(RunResult):
    """`grep -r -n`: every matching line inside the cap, in the order grep found them."""

    matches: list[Match] = Field(default_factory=list)


class LinesAt(RunResult):
    """Chosen lines of one file, by number (grep's context)."""

    lines: dict[int, str] = Field(default_factory=dict)
