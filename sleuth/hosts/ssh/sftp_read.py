"""One byte range of a file over SFTP, its chunk requests pipelined from the calling thread.

paramiko's own pipelined read (`SFTPFile.readv`) sends its requests from a second thread.
When the answers outrun that thread, it takes the prefetch for finished and asks again for
the rest with plain reads, so on a busy client a range crossed the wire up to twice
(paramiko PR #2519, open as of paramiko 5.1). Here the calling thread sends and collects
every request itself, keeping a bounded number in flight. Sending and collecting use
paramiko's request-number internals (`_async_request`, `_read_response`), the same ones
its SFTPFile has used since 2011; `tests/test_ssh_host.py` counts the bytes on the wire.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import paramiko
from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, int64

SFTP_CHUNK = 32 * 1024
"""Bytes per read request: the most every SFTP server answers in one reply."""
IN_FLIGHT = 64
"""Requests outstanding at once (2 MiB), as OpenSSH's sftp keeps by default."""


def read(sftp: paramiko.SFTPClient, path: str, offset: int, length: int) -> bytes:
    with sftp.open(path, "rb") as fh:
        size = fh.stat().st_size or 0
        if size:
            length = max(0, min(length, size - offset))
        # A size of 0 (e.g. /proc files) says nothing of the content: one request at a time
        # until the server says end of file.
        reader = _RangeReader(sftp, fh.handle, IN_FLIGHT if size else 1)
        return reader.read(offset, length)


class _RangeReader:
    """The object paramiko hands each answer to, by request number (`_async_response`)."""

    def __init__(self, sftp: paramiko.SFTPClient, handle: Any, in_flight: int) -> None:
        self._sftp: Any = sftp  # for the internals the stubs leave out
        self._handle = handle
        self._in_flight = in_flight
        self._answers: dict[int, bytes] = {}
        self._error: Exception | None = None

    def read(self, offset: int, length: int) -> bytes:
        end = offset + length
        chunks = deque((at, min(SFTP_CHUNK, end - at)) for at in range(offset, end, SFTP_CHUNK))
        pending: deque[tuple[int, int, int]] = deque()
        parts: list[bytes] = []
        # Answers still due when this stops (an error, the end of the file) are collected by
        # the file's close, which reads up to its own answer; paramiko hands them to this
        # reader, so none reaches another read on this client.
        while chunks or pending:
            while chunks and len(pending) < self._in_flight:
                at, size = chunks.popleft()
                pending.append((self._send(at, size), at, size))
            num, at, size = pending.popleft()
            data = self._wait(num)[:size]  # a longer answer than asked is not this range
            while 0 < len(data) < size:  # a server may answer short before the end
                want = size - len(data)
                more = self._wait(self._send(at + len(data), want))[:want]
                if not more:
                    break
                data += more
            parts.append(data)
            if len(data) < size:  # end of file (or the file shrank): stop here
                break
        return b"".join(parts)

    def _send(self, at: int, size: int) -> int:
        num: int = self._sftp._async_request(self, CMD_READ, self._handle, int64(at), int(size))
        return num

    def _wait(self, num: int) -> bytes:
        while num not in self._answers:
            self._sftp._read_response()
        if self._error is not None:
            raise self._error
        return self._answers.pop(num)

    def _async_response(self, kind: int, msg: paramiko.Message, num: int) -> None:
        self._answers[num] = b""
        if kind == CMD_DATA:
            self._answers[num] = msg.get_string()
        elif kind == CMD_STATUS:
            try:
                self._sftp._convert_status(msg)
            except EOFError:
                pass  # past the end: an empty answer
            except OSError as exc:
                self._error = self._error or exc
        else:
            self._error = self._error or paramiko.SFTPError(f"unexpected SFTP reply type {kind}")
