"""Files in the transcripts folder, opened as themselves: never through a link, created
exclusively, 0600.

```python
data = read_file(path)                 # ELOOP for a symbolic link
write_new(backup, data)                # FileExistsError when anything is there
replace_whole(sig_path, armored)       # a fresh temporary name, renamed over the file
```

A folder someone else can write may hold links planted where Sleuth will write (`T.torn`,
`T.sig`, a temporary name): followed, they would make a repair or a signature overwrite their
targets, and a file created by `open(..., "w")` would get the umask's wider mode.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC
"""Transcripts and their signatures are opened as the files themselves: a link planted in the
transcripts folder would otherwise make a reader show, or a writer overwrite, its target."""


def read_file(path: Path) -> bytes:
    """The bytes of the regular file at `path`, never through a symbolic link.

    Raises OSError (ELOOP for a link) like `open` does.
    """
    fd = os.open(path, os.O_RDONLY | NO_LINK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_new(path: Path, data: bytes) -> None:
    """Create `path` (0600, never through a link, never over an existing file) holding `data`,
    fsynced. Raises FileExistsError when anything, a planted link included, is there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_LINK, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_whole(path: Path, data: bytes) -> None:
    """Put `data` at `path` whole (a reader sees the old file or the new one), 0600, through a
    temporary file no one could have planted (a fresh random name, created exclusively)."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        write_new(temp, data)
        os.replace(temp, path)  # a rename replaces a link itself, never its target
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
