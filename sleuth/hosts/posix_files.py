"""The file reads of `rooted.py` with POSIX tools, for this machine and a host without Python.

Each builds a fixed argument vector (`--` before operands, `-e` before patterns), runs it
through the sandbox's capped `run`, and parses the tool's output into the same typed results
Sleuth's program returns. Records end at NUL where a name may hold a newline (`find`'s
`%P\\0`, `grep -Z`), and a record the host's cap cut short is dropped, as the program drops
it. The tools open paths by name, so here the roots hold only as far as the path was checked
before the tool ran (SECURITY.md: "Roots under a race").
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
COUNT_SCRIPT = 'cut -b 1-1 -- "$1" | wc -l'
"""The file's line count when the cap cut READ_LINES_SCRIPT's last line, its count: streaming,
each line one byte."""


def _whole_lines(stdout: bytes) -> list[bytes]:
    """The complete lines of a capped output (a line cut by the cap is dropped)."""
    return stdout.split(b"\n")[:-1]


def read_lines(run: Run, path: str, start: int, end: int, width: int) -> LineRange:
    """The script prints the count last, so when the host's cap cut it off, COUNT_SCRIPT
    supplies it; `stdout_cut` is then every byte after the whole lines kept."""
    limits = [str(width), path, str(start), str(end)]
    done = run(["sh", "-c", READ_LINES_SCRIPT, "sleuth-read-lines", *limits])
    if done.timed_out or done.exit_code != 0:
        return LineRange(**_fields(done))
    lines = _whole_lines(done.stdout)
    if not done.stdout_cut:
        total = int(lines.pop()) if lines and lines[-1].isdigit() else 0
        return LineRange(**_fields(done), lines=lines, total=total)
    count = run(["sh", "-c", COUNT_SCRIPT, "sleuth-count-lines", path])
    counted = count.stdout.strip()
    if count.timed_out or count.exit_code != 0 or not counted.isdigit():
        # `wc -l` prints a number whenever it succeeds: none is a failure all the same.
        code = count.exit_code or (None if count.timed_out else 1)
        return LineRange(**(_fields(count) | {"exit_code": code}))
    cut = done.stdout_cut + len(done.stdout) - sum(len(line) + 1 for line in lines)
    fields = _fields(done) | {
        "stdout_cut": cut,
        "reconnected": done.reconnected or count.reconnected,
    }
    return LineRange(**fields, lines=lines, total=int(counted), count_argv=count.argv)


def list_dir(run: Run, path: str, depth: int) -> Listing:
    argv = ["find", "-P", path, "-mindepth", "1", "-maxdepth", str(depth)]
    done = run([*argv, "-printf", r"%y\t%s\t%P\0"])
    entries = []
    # NUL ends each entry, since a name may hold a newline; a last entry the host's cap cut
    # short has none and is left out.
    for record in done.stdout.split(b"\x00")[:-1]:
        parts = record.decode(errors="replace").split("\t", 2)
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
    return GrepRun(**_fields(done), matches=parse_grep(done.stdout))


def parse_grep(stdout: bytes) -> list[Match]:
    """`grep -n -Z` output -> (file, line number, text).

    Each record is `NAME\\0N:TEXT\\n`. A name may hold newlines (only NUL is barred from
    it) and a text may not, so records are split at NULs: the text runs to the first
    newline after one, and the next name from there to the next NUL. A last record
    without its newline (a host's cap cut it) is dropped, as its text may be cut short.
    """
    out = []
    chunks = stdout.split(b"\x00")
    name = chunks[0]
    for chunk in chunks[1:]:
        rest, newline, following = chunk.partition(b"\n")
        number, colon, text = rest.partition(b":")
        if newline and colon and number.isdigit():
            out.append((name.decode(errors="replace"), int(number), text.decode(errors="replace")))
        name = following
    return out


def lines_at(run: Run, path: str, numbers: Iterable[int]) -> LinesAt:
    # `=` prints the number, `p` the line: the two alternate, whatever the line holds. A line
    # the host's cap cut short is not shown: only whole lines, each after its number.
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
