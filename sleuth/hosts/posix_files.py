"""The file reads of `rooted.py` with POSIX tools, for this machine and a host without Python.

Each builds a fixed argument vector (`--` before operands, `-e` before patterns), runs it
through the sandbox's capped `run`, and parses the tool's output into the same typed results
Sleuth's program returns. The tools open paths by name, so here the roots hold only as far as
the path was checked before the tool ran (SECURITY.md: "Roots under a race").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sleuth.hosts.host import RunResult
from sleuth.hosts.replies import FIND_KINDS, DirEntry, GrepRun, LineRange, LinesAt, Listing, Match

Run = Callable[..., RunResult]
"""SandboxedHost.run: argv, and optionally timeout, max_bytes, stdin."""

READ_LINES_SCRIPT = 'cut -b "1-$1" -- "$2" | sed -n -e "$3,$4p" -e "\\$="'
"""A fixed script: the path and numbers arrive as positional parameters, never as code. `cut`
streams, so a file of one enormous line costs no memory, where `sed` alone would hold it."""


def _whole_lines(stdout: bytes) -> list[bytes]:
    """The complete lines of a capped output (a line cut by the cap is dropped)."""
    return stdout.split(b"\n")[:-1]


def read_lines(run: Run, path: str, start: int, end: int, width: int) -> LineRange:
    argv = ["sh", "-c", READ_LINES_SCRIPT, "sleuth-read-lines", str(width), path]
    done = run([*argv, str(start), str(end)])
    lines = _whole_lines(done.stdout)
    total = None
    if not done.stdout_cut and lines and lines[-1].isdigit():
        total = int(lines.pop())
    return LineRange(**_fields(done), lines=lines, total=total)


def list_dir(run: Run, path: str, depth: int) -> Listing:
    argv = ["find", "-P", path, "-mindepth", "1", "-maxdepth", str(depth)]
    done = run([*argv, "-printf", r"%y\t%s\t%P\n"])
    entries = []
    for line in _whole_lines(done.stdout):
        parts = line.decode(errors="replace").split("\t", 2)
        if len(parts) == 3 and parts[1].isdigit():
            kind = FIND_KINDS.get(parts[0], "other")
            entries.append(DirEntry(kind=kind, size=int(parts[1]), name=parts[2]))
    return Listing(**_fields(done), entries=entries)


def grep(
    run: Run,
    path: str,
    flags: Sequence[str],
    include: str | None,
    pattern: str,
    max_count: int | None,
    max_bytes: int | None,
) -> GrepRun:
    select = [f"--include={include}"] if include else []
    limit = ["-m", str(max_count)] if max_count is not None else []
    argv = ["grep", "-r", "-n", "-H", "-I", "-Z", "--color=never", *select, *flags, *limit]
    done = run([*argv, "-e", pattern, "--", path], max_bytes=max_bytes)
    return GrepRun(**_fields(done), matches=list(parse_grep(_whole_lines(done.stdout))))


def parse_grep(lines: Iterable[bytes]) -> Iterable[Match]:
    """`grep -n -Z` output lines -> (file, line number, text)."""
    for line in lines:
        name, sep, rest = line.partition(b"\x00")
        number, colon, text = rest.partition(b":")
        if sep and colon and number.isdigit():
            yield name.decode(errors="replace"), int(number), text.decode(errors="replace")


def lines_at(run: Run, path: str, numbers: Iterable[int]) -> LinesAt:
    # `=` prints the number, `p` the line: the two alternate, whatever the line holds.
    script = ";".join(f"{n}{{=;p;}}" for n in sorted(set(numbers)))
    done = run(["sed", "-n", "-e", script, "--", path])
    printed = _whole_lines(done.stdout)
    found = {}
    for number, text in zip(printed[0::2], printed[1::2], strict=False):
        if number.isdigit():
            found[int(number)] = text.decode(errors="replace")
    return LinesAt(**_fields(done), lines=found)


def _fields(done: RunResult) -> dict[str, Any]:
    return done.model_dump()
