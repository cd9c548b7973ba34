"""Sleuth's host program: file requests served beneath the roots, over stdin and stdout.

Sleuth starts it once per SSH connection as `python3 -I -S -c BOOT serve` and sends its
source on stdin, so nothing is written to the host's disk and no login shell runs per call.
On the per-call exec path the same program runs as `python3 -I -S -c BOOT once` for one
request. Standard library only; Python 3.8+.

The wire: every message is a frame of 8 bytes (header length, payload length, big-endian),
a JSON header, then a binary payload. After the source Sleuth sends one frame of module
sources (`checkpoint_probe`, `secret_scan`); the program answers with a hello frame that
carries PROTOCOL and the sha256 of everything it was sent. Requests are {"id", "op", ...};
each answer is {"id", "ok": true, ...} or {"id", "ok": false, "error": {"kind", ...}}.
Requests are served on worker threads, so several may be in flight at once.

Every path is opened beneath an allowed root. The root is opened from "/" one component at
a time with O_NOFOLLOW; each component below it is opened relative to the directory opened
before it, again with O_NOFOLLOW. A symlink met on the way is read and its target walked
the same way, re-checked against the roots at every step: a link inside the roots that
points inside them works, and one that leads out is refused without looking where it leads.
The kernel never walks a path string on its own, so a symlink swapped in mid-call cannot
lead outside the roots.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import struct
import sys
import threading
import time
import types

TYPE_CHECKING = False
if TYPE_CHECKING:  # not imported on the host: `typing` alone costs a per-call run 3 ms
    from collections.abc import Callable, Generator, Iterator
    from typing import Any

    Reply = tuple[dict[str, Any], bytes]
    Reader = Callable[[int], bytes]

PROTOCOL = 1
"""Raised whenever a request or an answer changes shape."""
BOOT = (
    "import sys;r=sys.stdin.buffer;s=r.read(int(r.readline()));"
    "exec(compile(s,'sleuth-host-program','exec'),{'__name__':'__sleuth__','SOURCE':s})"
)
"""The `-c` argument: read the program's length and source from stdin, then run it."""
FRAME = struct.Struct(">II")
WORKERS = 16
MAX_LINKS = 40
"""Symlinks followed in one walk, as the kernel allows."""
CHUNK = 1 << 16
GREP_BATCH = 1024
"""Files handed to one grep process, as /dev/fd/N each (fewer where descriptors are few)."""
REOPEN_TRIES = 3
"""A final component that turns into a symlink between its check and its open is walked
again this many times before the open fails."""

SEARCH = getattr(os, "O_PATH", os.O_RDONLY)
"""O_PATH (Linux) walks a directory that may be searched but not read, as the kernel does."""
STEP = SEARCH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FILE = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
"""O_NONBLOCK: opening a FIFO must not wait for a writer."""


class Refused(Exception):
    """A path that is not beneath the roots: `how` is "outside" (as written) or "link" (a
    symlink on the way leads out). Where it leads is never looked at or said."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class TimedOut(Exception):
    """The request ran past its deadline."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise TimedOut()


# ---------------------------------------------------------------- beneath the roots


class Spot:
    """The final component of a walked path: an open directory (to close) and a name in it."""

    def __init__(self, fd: int, name: str, real: str) -> None:
        self.fd, self.name, self.real = fd, name, real


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def open_dir_from_top(path: str) -> int:
    """A directory opened from "/" one component at a time, never through a symlink."""
    fd = os.open("/", SEARCH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in _parts(path):
            nxt = os.open(part, STEP, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


class Beneath:
    """Walks paths beneath `roots` (real absolute paths) on open directory descriptors."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = [r.rstrip("/") or "/" for r in roots]

    def _is_root(self, path: str) -> bool:
        return path in self.roots

    def _above_a_root(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(r.startswith(prefix) for r in self.roots)

    def locate(self, path: str, follow: bool) -> Spot:
        """Where the last component of `path` sits, every symlink before it walked beneath
        the roots; with `follow`, a final symlink too (and a missing final component is an
        error). FileNotFoundError, NotADirectoryError or Refused when there is no such spot."""
        todo = list(reversed(_parts(path)))
        stack: list[int] = []
        cur, links = "/", 0
        if self._is_root("/"):
            stack.append(open_dir_from_top("/"))
        try:
            while True:
                if not todo:
                    return self._spot_of_current(stack, cur, links)
                part = todo.pop()
                if part == "..":
                    if cur != "/":
                        cur = os.path.dirname(cur)
                        if stack:
                            os.close(stack.pop())
                    continue
                nxt = _join(cur, part)
                if not stack:
                    if self._is_root(nxt):
                        if not todo:
                            return Spot(open_dir_from_top(cur), part, nxt)
                        stack.append(open_dir_from_top(nxt))
                    elif not self._above_a_root(nxt):
                        raise Refused("link" if links else "outside")
                    cur = nxt
                    continue
                if not todo and not follow:
                    return Spot(os.dup(stack[-1]), part, nxt)
                target = self._step(stack, part, last=not todo)
                if target is None:
                    if not todo:
                        return Spot(os.dup(stack[-1]), part, nxt)
                    cur = nxt
                    continue
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                if target.startswith("/"):
                    while stack:
                        os.close(stack.pop())
                    cur = "/"
                    if self._is_root("/"):
                        stack.append(open_dir_from_top("/"))
                todo.extend(reversed(_parts(target)))
        finally:
            for fd in stack:
                os.close(fd)

    def _step(self, stack: list[int], part: str, last: bool) -> str | None:
        """Go into directory `part` of the one on top of `stack` (pushing it), or return the
        target when `part` is a symlink. A `last` component is only looked at (lstat): it
        stays where it is, whatever it is."""
        here = stack[-1]
        if last:
            if stat.S_ISLNK(os.stat(part, dir_fd=here, follow_symlinks=False).st_mode):
                return os.readlink(part, dir_fd=here)
            return None
        try:
            stack.append(os.open(part, STEP, dir_fd=here))
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if stat.S_ISLNK(os.stat(part, dir_fd=here, follow_symlinks=False).st_mode):
                return os.readlink(part, dir_fd=here)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from None
        return None

    def _spot_of_current(self, stack: list[int], cur: str, links: int) -> Spot:
        """The walk ended on a directory (after ".." or at a root): its parent and name."""
        if not stack and not self._is_root(cur):
            raise Refused("link" if links else "outside")
        if cur == "/":
            return Spot(open_dir_from_top("/"), ".", "/")
        if len(stack) >= 2:
            return Spot(os.dup(stack[-2]), os.path.basename(cur), cur)
        return Spot(open_dir_from_top(os.path.dirname(cur)), os.path.basename(cur), cur)

    def open(self, path: str, flags: int) -> tuple[int, str]:
        """`path` opened with `flags` (O_NOFOLLOW added) beneath the roots, and its real path."""
        for _ in range(REOPEN_TRIES):
            spot = self.locate(path, follow=True)
            try:
                return os.open(spot.name, flags | os.O_NOFOLLOW, dir_fd=spot.fd), spot.real
            except OSError as exc:
                if exc.errno != errno.ELOOP:  # anything but "it became a symlink meanwhile"
                    raise
            finally:
                os.close(spot.fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))

    def open_file(self, path: str) -> tuple[int, os.stat_result]:
        """A regular file beneath the roots, opened for reading, and its stat."""
        fd, _ = self.open(path, READ_FILE)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def stat(self, path: str, follow: bool) -> os.stat_result:
        spot = self.locate(path, follow=follow)
        try:
            return os.stat(spot.name, dir_fd=spot.fd, follow_symlinks=False)
        finally:
            os.close(spot.fd)


def read_at(fd: int, offset: int, length: int) -> bytes:
    parts, left = [], length
    while left > 0:
        part = os.pread(fd, min(left, 1 << 24), offset)
        if not part:
            break
        parts.append(part)
        offset += len(part)
        left -= len(part)
    return b"".join(parts)


# ---------------------------------------------------------------- requests


def op_ping(req: dict[str, Any], ctx: Context) -> Reply:
    return {}, b""


def op_roots(req: dict[str, Any], ctx: Context) -> Reply:
    """Each configured root: what it is (not following a final link) and its real path."""
    found = []
    for path in req["paths"]:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            found.append({"path": path, "mode": 0, "real": None})
            continue
        real = os.path.realpath(path) if stat.S_ISLNK(st.st_mode) else None
        found.append({"path": path, "mode": st.st_mode, "real": real or os.path.realpath(path)})
    return {"roots": found}, b""


def op_resolve(req: dict[str, Any], ctx: Context) -> Reply:
    spot = Beneath(req["roots"]).locate(req["path"], follow=True)
    os.close(spot.fd)
    return {"real": spot.real}, b""


def op_stat(req: dict[str, Any], ctx: Context) -> Reply:
    try:
        st = Beneath(req["roots"]).stat(req["path"], follow=False)
    except (FileNotFoundError, NotADirectoryError):
        return {"mode": None}, b""
    return {"mode": st.st_mode, "size": st.st_size, "mtime": st.st_mtime}, b""


def op_read(req: dict[str, Any], ctx: Context) -> Reply:
    fd, _ = Beneath(req["roots"]).open_file(req["path"])
    try:
        return {}, read_at(fd, int(req["offset"]), int(req["length"]))
    finally:
        os.close(fd)


class Lines:
    """The lines of an open file, read in chunks: each wanted line's first `width` bytes and
    its full length, never a whole long line in memory; `total` counts every line, a last
    one without its newline included (as `cut` and `sed` count it)."""

    def __init__(self, fd: int, width: int, deadline: Deadline) -> None:
        self.fd, self.width, self.deadline = fd, width, deadline
        self.total = 0

    def wanted(self, want: Callable[[int], bool], last: int) -> Iterator[tuple[int, bytes, int]]:
        line, length, tail = b"", 0, False
        while True:
            self.deadline.check()
            chunk = os.read(self.fd, CHUNK)
            if not chunk:
                break
            tail = not chunk.endswith(b"\n")
            if self.total >= last:  # past every wanted line: only count
                self.total += chunk.count(b"\n")
                continue
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                if want(self.total + 1):
                    yield (
                        self.total + 1,
                        line + piece[: self.width - len(line)],
                        length + len(piece),
                    )
                self.total += 1
                line, length = b"", 0
            if want(self.total + 1):
                line += pieces[-1][: self.width - len(line)]
                length += len(pieces[-1])
        if tail:
            self.total += 1
            if want(self.total):
                yield self.total, line, length


def op_read_lines(req: dict[str, Any], ctx: Context) -> Reply:
    """Lines START..END, each cut at LINE_BYTES, and the file's line count: what
    `cut -b 1-LINE_BYTES | sed -n 'START,ENDp; $='` prints, capped at MAX_BYTES of that
    output. Only whole lines inside the cap come back; `cut` counts every byte after them
    (a line cut in part, the lines after it, the count line). The count comes back always."""
    start, end, width, cap = (int(req[k]) for k in ("start", "end", "line_bytes", "max_bytes"))
    fd, _ = Beneath(req["roots"]).open_file(req["path"])
    lines = Lines(fd, width, Deadline(float(req["timeout"])))
    kept: list[bytes] = []
    printed = 0
    try:
        for _, text, _ in lines.wanted(lambda n: start <= n <= end, end):
            printed += len(text) + 1
            if printed <= cap:
                kept.append(text)
    finally:
        os.close(fd)
    if lines.total:
        printed += len(str(lines.total)) + 1
    cut = 0 if printed <= cap else printed - sum(len(k) + 1 for k in kept)
    return {"sizes": [len(k) for k in kept], "total": lines.total, "cut": cut}, b"".join(kept)


FIND_KINDS = {
    stat.S_IFDIR: "d", stat.S_IFREG: "f", stat.S_IFLNK: "l", stat.S_IFIFO: "p",
    stat.S_IFSOCK: "s", stat.S_IFCHR: "c", stat.S_IFBLK: "b",
}  # fmt: skip


def _name(raw: str) -> str:
    """A file name as text, bytes that are not UTF-8 replaced (as Sleuth decodes them)."""
    return raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def op_list_dir(req: dict[str, Any], ctx: Context) -> Reply:
    """Entries DEPTH levels down, not following links: what `find -P PATH -mindepth 1
    -maxdepth DEPTH -printf '%y\\t%s\\t%P\\n'` prints, capped at MAX_BYTES of that output."""
    depth, cap = int(req["depth"]), int(req["max_bytes"])
    deadline = Deadline(float(req["timeout"]))
    fd, _ = Beneath(req["roots"]).open(req["path"], READ_DIR)
    listing: dict[str, Any] = {"entries": [], "printed": 0, "denied": []}
    try:
        _list(fd, "", 1, depth, cap, deadline, listing)
    finally:
        os.close(fd)
    cut = max(0, listing["printed"] - cap)
    denied = listing["denied"]
    return {"entries": listing["entries"], "cut": cut, "denied": denied}, b""


def _list(
    fd: int,
    prefix: str,
    level: int,
    depth: int,
    cap: int,
    deadline: Deadline,
    listing: dict[str, Any],
) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            deadline.check()
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # gone since the directory was read
                continue
            rel = prefix + entry.name
            kind = FIND_KINDS.get(stat.S_IFMT(st.st_mode), "?")
            size = len(b"%s\t%d\t" % (kind.encode(), st.st_size)) + len(os.fsencode(rel)) + 1
            listing["printed"] += size
            if listing["printed"] <= cap:
                listing["entries"].append([kind, st.st_size, _name(rel)])
            if kind == "d" and level < depth:
                try:
                    sub = os.open(entry.name, READ_DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.EACCES, errno.EPERM):
                        continue  # replaced or removed since it was listed
                    listing["denied"].append(_name(rel))
                    continue
                try:
                    _list(sub, rel + "/", level + 1, depth, cap, deadline, listing)
                finally:
                    os.close(sub)


def _searched(
    beneath: Beneath, path: str, include: str | None, deadline: Deadline, denied: list[str]
) -> Generator[tuple[int, str], None, None]:
    """The regular files to search under `path`, each opened as it is reached (the caller
    closes it): `path` itself (its links followed, as grep follows a link named on its
    command line), or every file below it, links not followed, as `grep -r` walks. Only the
    folders on the way down stay open meanwhile; names that could not be opened go to
    `denied`."""
    fd, real = beneath.open(path, READ_FILE)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            yield from _walk_dir(fd, real, include, deadline, denied)
        elif stat.S_ISREG(mode) and _included(real, include):
            yield os.dup(fd), real
    finally:
        os.close(fd)


def _included(name: str, include: str | None) -> bool:
    """grep's --include: the file's own name matches the glob (for a named file too)."""
    import fnmatch  # here: a per-call run that never greps should not pay for it

    return include is None or fnmatch.fnmatchcase(os.path.basename(name), include)


def _walk_dir(
    fd: int, where: str, include: str | None, deadline: Deadline, denied: list[str]
) -> Iterator[tuple[int, str]]:
    with os.scandir(fd) as entries:
        for entry in entries:
            deadline.check()
            name = _join(where, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):
                    sub = os.open(entry.name, READ_DIR, dir_fd=fd)
                elif entry.is_file(follow_symlinks=False) and _included(entry.name, include):
                    opened = os.open(entry.name, READ_FILE, dir_fd=fd)
                    if stat.S_ISREG(os.fstat(opened).st_mode):
                        yield opened, name
                    else:
                        os.close(opened)
                    continue
                else:
                    continue
            except OSError as exc:  # gone or replaced since it was listed: skipped, as grep does
                if exc.errno in (errno.EACCES, errno.EPERM):
                    denied.append(name)
                continue
            try:
                yield from _walk_dir(sub, name, include, deadline, denied)
            finally:
                os.close(sub)


MATCH_FLAGS = {"-E", "-F", "-G", "-i"}


def op_grep(req: dict[str, Any], ctx: Context) -> Reply:
    """`grep -r -n -H -I -Z [--include=GLOB] FLAGS -m MAX -e PATTERN -- PATH`, with every
    file opened beneath the roots and handed to the host's own grep as /dev/fd/N (so the
    pattern dialect is grep's). Matches come back parsed; the cap counts the bytes grep's
    output would have held, with the real names."""
    flags = list(req["flags"])
    if not set(flags) <= MATCH_FLAGS:
        raise ValueError(f"grep flags {flags} are not match flags")
    deadline = Deadline(float(req["timeout"]))
    cap = int(req["max_bytes"])
    denied: list[str] = []
    files = _searched(Beneath(req["roots"]), req["path"], req.get("include"), deadline, denied)
    base = ["grep", "-n", "-H", "-I", "-Z", "--color=never", *flags]
    if req.get("max_count") is not None:
        base += ["-m", str(int(req["max_count"]))]
    base += ["-e", req["pattern"], "--"]
    found: dict[str, Any] = {"matches": [], "printed": 0, "matched": False, "stderr": b""}
    batch: list[tuple[int, str]] = []
    ran, size = False, _batch_size()
    try:
        for opened in files:
            batch.append(opened)
            if len(batch) == size:
                _grep_batch(base, batch, deadline, cap, found)
                ran = True
                _close(batch)
        if batch or not ran:  # an empty tree still has grep judge the pattern
            _grep_batch(base, batch, deadline, cap, found)
    finally:
        _close(batch)
        files.close()
    stderr = found["stderr"]
    for name in denied:
        stderr += f"grep: {name}: Permission denied\n".encode("utf-8", "surrogateescape")
    code = 2 if denied or found["stderr"] else 0 if found["matched"] else 1
    cut = max(0, found["printed"] - cap)
    return {"matches": found["matches"], "cut": cut, "code": code}, stderr[-4096:]


def _close(batch: list[tuple[int, str]]) -> None:
    while batch:
        os.close(batch.pop()[0])


def _grep_batch(
    base: list[str],
    batch: list[tuple[int, str]],
    deadline: Deadline,
    cap: int,
    found: dict[str, Any],
) -> None:
    """One grep over `batch`, its output read as it comes: a line is kept only up to what
    the cap could still hold, so a match on a 100 MB line costs no more memory than that."""
    import subprocess  # here: a per-call run that never greps should not pay for it

    names = {f"/dev/fd/{fd}".encode(): name for fd, name in batch}
    argv = base + ([n.decode() for n in names] if batch else ["/dev/null"])
    if deadline.left() <= 0:
        raise TimedOut()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=[fd for fd, _ in batch],
    )
    killer = threading.Timer(deadline.left(), proc.kill)
    killer.start()
    said: list[bytes] = []
    drain = threading.Thread(target=lambda: said.append(proc.stderr.read()))  # type: ignore[union-attr]
    drain.start()
    try:
        _read_matches(proc.stdout, names, cap, found)
        code = proc.wait()
        drain.join()
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if deadline.left() <= 0:
        raise TimedOut()
    found["matched"] |= code == 0
    if code not in (0, 1):
        found["stderr"] += b"".join(said) or b"grep: exit %d\n" % code


def _read_matches(out: Any, names: dict[bytes, str], cap: int, found: dict[str, Any]) -> None:
    head, length = b"", 0  # the current line's first bytes, and its whole length
    keep = cap + 256  # past this a line cannot fit under the cap, name and number included
    while True:
        chunk = out.read1(CHUNK)
        if not chunk:
            break
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:
            _match(head + piece[: keep - len(head)], length + len(piece), names, cap, found)
            head, length = b"", 0
        head += pieces[-1][: keep - len(head)]
        length += len(pieces[-1])
    if length:
        _match(head, length, names, cap, found)


def _match(
    head: bytes, length: int, names: dict[bytes, str], cap: int, found: dict[str, Any]
) -> None:
    """One line of `grep -n -H -Z` output (its first bytes, its full length): counted as the
    bytes it would print with the real file name, and kept while under the cap."""
    fdname, sep, rest = head.partition(b"\0")
    number, colon, text = rest.partition(b":")
    if not (sep and colon and number.isdigit()):
        return
    name = names.get(fdname, "")
    raw_name = name.encode("utf-8", "surrogateescape")
    found["printed"] += len(raw_name) + length - len(fdname) + 1
    if found["printed"] <= cap:
        found["matches"].append([_name(name), int(number), text.decode("utf-8", "replace")])


def op_lines_at(req: dict[str, Any], ctx: Context) -> Reply:
    """The lines numbered in NUMBERS: what `sed -n 'N{=;p;}'...` prints, capped at
    MAX_BYTES of that output; only whole number-and-line pairs inside the cap come back."""
    wanted = set(int(n) for n in req["numbers"])
    cap = int(req["max_bytes"])
    fd, _ = Beneath(req["roots"]).open_file(req["path"])
    lines = Lines(fd, cap + 1, Deadline(float(req["timeout"])))
    got: dict[str, str] = {}
    printed = 0
    try:
        for number, text, length in lines.wanted(wanted.__contains__, max(wanted, default=0)):
            printed += len(str(number)) + 1 + length + 1
            if printed <= cap:
                got[str(number)] = text.decode("utf-8", "replace")
    finally:
        os.close(fd)
    return {"lines": got, "cut": max(0, printed - cap)}, b""


def op_program(req: dict[str, Any], ctx: Context) -> Reply:
    """One of Sleuth's file-reading programs, with every open beneath the roots: its
    output is what the program prints when run on its own."""
    name, argv, roots = req["name"], list(req["argv"]), req["roots"]
    if name == "secret_scan.py":
        return {}, scan_secrets(ctx, argv, Beneath(roots))
    if name == "checkpoint_probe.py":
        if ctx.once:
            return {}, probe_checkpoint(ctx, argv[0], Beneath(roots))
        return ctx.in_child(req)
    raise ValueError(f"no program {name!r} is served here")


def scan_secrets(ctx: Context, argv: list[str], beneath: Beneath) -> bytes:
    scan = ctx.module("secret_scan")

    def read(path: str) -> bytes | None:
        try:
            fd, st = beneath.open_file(path)
        except Refused:
            raise PermissionError(errno.EACCES, "outside the roots") from None
        try:
            if st.st_size > scan.MAX_SCAN_BYTES:
                return None
            return read_at(fd, 0, st.st_size)
        finally:
            os.close(fd)

    doc = scan.scan_files(scan.Rules(json.loads(argv[0])), argv[1:], read)
    return json.dumps(doc).encode()


class BeneathFs:
    """The checkpoint probe's file interface, every open beneath the roots."""

    def __init__(self, beneath: Beneath, error: Any) -> None:
        self.beneath, self.error = beneath, error
        self.bytes_read = 0

    def size(self, path: str) -> int | None:
        try:
            return self.beneath.stat(path, follow=True).st_size
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Refused:
            raise self.error(f"{path} leads outside the roots") from None

    def read(self, path: str, offset: int, length: int) -> bytes:
        try:
            fd, _ = self.beneath.open_file(path)
        except Refused:
            raise self.error(f"{path} leads outside the roots") from None
        try:
            data = read_at(fd, offset, length)
        finally:
            os.close(fd)
        self.bytes_read += len(data)
        return data

    def listdir(self, path: str) -> list[str]:
        try:
            fd, _ = self.beneath.open(path, READ_DIR)
        except Refused:
            raise self.error(f"{path} leads outside the roots") from None
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)


def probe_checkpoint(ctx: Context, model_dir: str, beneath: Beneath) -> bytes:
    probe = ctx.module("checkpoint_probe")
    try:
        fs = BeneathFs(beneath, probe.ProbeError)
        doc: dict[str, Any] = {"ok": True, "summary": probe.summarise(model_dir, fs, fork=True)}
    except (probe.ProbeError, OSError) as exc:
        doc = {"ok": False, "error": str(exc)}
    except Refused:
        doc = {"ok": False, "error": f"{model_dir} leads outside the roots"}
    except Exception as exc:  # a bug here: Sleuth says so and takes its slower path
        doc = {"ok": False, "crash": f"{type(exc).__name__}: {exc}"}
    return json.dumps(doc, separators=(",", ":")).encode()


OPS: dict[str, Callable[[dict[str, Any], Context], Reply]] = {
    "ping": op_ping,
    "roots": op_roots,
    "resolve": op_resolve,
    "stat": op_stat,
    "read": op_read,
    "read_lines": op_read_lines,
    "list_dir": op_list_dir,
    "grep": op_grep,
    "lines_at": op_lines_at,
    "program": op_program,
}


def answer(req: dict[str, Any], ctx: Context) -> Reply:
    """One request's answer frame; failures become error answers, never a dead program."""
    head: dict[str, Any] = {"id": req.get("id"), "ok": True}
    try:
        result, payload = OPS[req["op"]](req, ctx)
    except Refused as exc:
        head.update(ok=False, error={"kind": "refused", "how": exc.how})
    except TimedOut:
        head.update(ok=False, error={"kind": "timeout"})
    except OSError as exc:
        message = exc.strerror or str(exc)
        head.update(ok=False, error={"kind": "os", "errno": exc.errno, "message": message})
    except (KeyError, ValueError, TypeError) as exc:
        head.update(
            ok=False, error={"kind": "bad-request", "message": f"{type(exc).__name__}: {exc}"}
        )
    except Exception as exc:
        head.update(ok=False, error={"kind": "crash", "message": f"{type(exc).__name__}: {exc}"})
    else:
        head.update(result)
        return head, payload
    return head, b""


# ---------------------------------------------------------------- frames and serving


def read_frame(read: Reader) -> tuple[dict[str, Any], bytes] | None:
    """The next frame from `read` (a stream's read), or None at the end of the stream."""
    top = read(FRAME.size)
    if len(top) < FRAME.size:
        return None
    size, length = FRAME.unpack(top)
    head, payload = read(size), read(length)
    if len(head) < size or len(payload) < length:
        return None
    found: dict[str, Any] = json.loads(head)
    return found, payload


def frame(head: dict[str, Any], payload: bytes = b"") -> bytes:
    raw = json.dumps(head, separators=(",", ":")).encode()
    return FRAME.pack(len(raw), len(payload)) + raw + payload


class Context:
    """What every request may use: the module sources, and a way to run one request in a
    child process of this program (for work that forks, which a threaded process must not)."""

    def __init__(self, source: bytes, modules: dict[str, bytes], bundle: bytes, once: bool):
        self.source, self.modules, self.bundle, self.once = source, modules, bundle, once
        self._lock = threading.Lock()

    def module(self, name: str) -> Any:
        with self._lock:
            if name not in sys.modules:
                made = types.ModuleType(name)
                sys.modules[name] = made
                exec(compile(self.modules[name], name + ".py", "exec"), made.__dict__)
            return sys.modules[name]

    def in_child(self, req: dict[str, Any]) -> Reply:
        """`req` answered by this program run once, in its own single-threaded process."""
        import subprocess

        child = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", BOOT, "once"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        sent = b"%d\n" % len(self.source) + self.source + self.bundle + frame(req)
        try:
            out, _ = child.communicate(sent, timeout=float(req["timeout"]))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise TimedOut() from None
        frames = []
        stream = _Bytes(out)
        while True:
            got = read_frame(stream.read)
            if got is None:
                break
            frames.append(got)
        if len(frames) < 2:
            raise RuntimeError(f"the child program answered nothing (exit {child.returncode})")
        head, payload = frames[1]
        head.pop("id", None)
        head.pop("ok", None)
        return head, payload


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, size: int) -> bytes:
        got = self.data[self.at : self.at + size]
        self.at += len(got)
        return got


class Writer:
    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, head: dict[str, Any], payload: bytes = b"") -> None:
        data = frame(head, payload)
        with self.lock:
            self.stream.write(data)
            self.stream.flush()


def _batch_size() -> int:
    """GREP_BATCH, or a quarter of the descriptors this process may hold if that is less."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return 64
    return GREP_BATCH if soft == resource.RLIM_INFINITY else max(16, min(GREP_BATCH, soft // 4))


def _more_files() -> None:
    """grep batches hold files open; the soft limit is often 1024."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(want, 65536)), hard))
    except (ImportError, ValueError, OSError):
        pass


def main(source: bytes, mode: str) -> None:
    stdin, out = sys.stdin.buffer, Writer(sys.stdout.buffer)
    first = read_frame(stdin.read)
    if first is None or first[0].get("op") != "modules":
        os._exit(3)
    head, payload = first
    modules, at = {}, 0
    for name, size in zip(head["names"], head["sizes"]):  # noqa: B905 (3.8 has no strict)
        modules[name] = payload[at : at + size]
        at += size
    digest = hashlib.sha256(source + payload).hexdigest()
    ctx = Context(source, modules, frame(head, payload), once=mode == "once")
    _more_files()
    out.send(
        {
            "hello": True,
            "protocol": PROTOCOL,
            "sha256": digest,
            "python": ".".join(str(n) for n in sys.version_info[:3]),
            "pid": os.getpid(),
        }
    )
    if ctx.once:
        while True:
            got = read_frame(stdin.read)
            if got is None:
                break
            out.send(*answer(got[0], ctx))
        sys.stdout.flush()
        os._exit(0)
    import queue

    jobs: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def work() -> None:
        while True:
            req = jobs.get()
            if req is None:
                return
            out.send(*answer(req, ctx))

    for _ in range(WORKERS):
        threading.Thread(target=work, daemon=True).start()
    while True:
        got = read_frame(stdin.read)
        if got is None:
            break
        jobs.put(got[0])
    # Sleuth closed the channel (or the connection dropped): work in flight has nobody to
    # answer to, so leave now rather than finish it.
    os._exit(0)


if __name__ == "__sleuth__":
    main(globals()["SOURCE"], sys.argv[1] if len(sys.argv) > 1 else "serve")
