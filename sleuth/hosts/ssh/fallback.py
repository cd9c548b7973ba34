"""stat, realpath and byte ranges by exec, for servers without the SFTP subsystem.

```python
files = ExecFiles(host.run, "gpu1", io_timeout=20)
files.read("/models/x/model.safetensors", 0, 8)
```

Each operation is one fixed `sh -c` script whose operands travel as positional parameters
(never spliced into the script), with `--` before every path handed to a tool. A range read
is byte-exact: `tail -c +N` seeks to the offset and `head -c` stops at the length, so only
the range crosses the wire. Failures come back as the same `OSError` classes that paramiko's
SFTP client raises, so the host treats both paths alike. Needs `stat -c` and `realpath`
(GNU coreutils or BusyBox, as `timeout` already does).
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import RunResult

MISSING, UNREADABLE, IS_DIR, NOT_INSTALLED = 3, 4, 5, 127

_EXISTS = '[ -e "$1" ] || [ -L "$1" ] || exit 3; '
STAT = _EXISTS + 'exec stat -c "%f %s %Y" -- "$1"'
"""lstat: raw mode in hex, size, mtime in whole seconds (as SFTP reports it)."""
REALPATH = '[ -e "$1" ] || exit 3; exec realpath -- "$1"'
"""`-e` follows links, so a dangling one is missing, as SFTP's stat after normalize says."""
READ = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] && exit 5; [ -r "$1" ] || exit 4; '
    'tail -c "+$2" -- "$1" | head -c "$3"'
)
MIN_RATE = 1 << 20
"""Bytes per second a range read may assume, on top of the request timeout."""


class ExecFiles:
    """The file half of the Host protocol over exec, with SFTP's error classes."""

    def __init__(self, run: Callable[..., RunResult], name: str, io_timeout: float) -> None:
        self._run, self.name, self.io_timeout = run, name, io_timeout

    def lstat(self, path: str) -> tuple[int, int, int]:
        """(mode, size, mtime) of `path` itself, a final symlink not followed."""
        out = self._script("stat", STAT, [path], max_bytes=256).decode().split()
        return int(out[0], 16), int(out[1]), int(out[2])

    def realpath(self, path: str) -> str:
        out = self._script("realpath", REALPATH, [path], max_bytes=64 * 1024).decode()
        return out.removesuffix("\n")

    def read(self, path: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        return self._script(
            "read",
            READ,
            [path, str(offset + 1), str(length)],
            max_bytes=length,
            timeout=self.io_timeout + length / MIN_RATE,
        )

    def _script(
        self,
        what: str,
        script: str,
        operands: list[str],
        *,
        max_bytes: int,
        timeout: float | None = None,
    ) -> bytes:
        argv = ["sh", "-c", script, f"sleuth-{what}", *operands]
        result = self._run(argv, timeout=timeout or self.io_timeout, max_bytes=max_bytes)
        path = operands[0]
        if result.timed_out:
            raise HostError(
                f"{what} of {path} on host {self.name!r} took longer than "
                f"{timeout or self.io_timeout:g} s",
                ErrorKind.TIMEOUT,
            )
        code = result.exit_code
        if code == 0:
            return result.stdout
        if code == MISSING:
            raise FileNotFoundError(errno.ENOENT, "No such file")
        if code == UNREADABLE:
            raise PermissionError(errno.EACCES, "Permission denied")
        if code == IS_DIR:
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        detail = result.stderr.decode(errors="replace").strip()
        if code == NOT_INSTALLED:
            raise HostError(
                f"host {self.name!r} has no SFTP subsystem, and the exec fallback for {what} "
                f"failed: {detail}. Install GNU coreutils there, or enable SFTP in its sshd",
                ErrorKind.COMMAND_NOT_FOUND,
            )
        raise OSError(errno.EIO, detail or f"exit {code}")
