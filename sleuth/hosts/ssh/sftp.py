"""SFTP clients for stat, realpath and byte ranges (`sftp_read.py`): a small pool per
connection.

SFTP skips the remote login shell and its start-up files (tens of milliseconds per exec on
some hosts), so file requests go this way when the server offers the subsystem. A server
without it (common on hardened hosts) is reported with `SftpUnavailable`; the host then
uses the exec fallback (`fallback.py`) for the rest of that connection.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import paramiko

from sleuth.hosts.ssh.connection import Connection

T = TypeVar("T")


class SftpUnavailable(Exception):
    """The server refused the SFTP subsystem on a connection that is otherwise fine."""


class SftpPool:
    """SFTP clients over the connection's current transport, one per concurrent caller.

    paramiko's SFTPClient loses responses when threads wait on it at once, so a client
    serves one thread at a time. The first client is free; each further one holds an exec
    slot of the connection until it closes, so that exec and SFTP channels together stay
    within sshd's MaxSessions.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._cond = threading.Condition()
        self._transport: paramiko.Transport | None = None
        self._idle: list[tuple[paramiko.SFTPClient, bool]] = []
        self._count = self._want = 0

    def do(self, transport: paramiko.Transport, op: Callable[[paramiko.SFTPClient], T]) -> T:
        client, extra = self._take(transport)
        ok = False
        try:
            result = op(client)
            ok = True
        except OSError as exc:
            ok = exc.errno is not None  # a file error leaves the client usable
            raise
        finally:
            self._give(transport, client, extra, ok)
        return result

    def reset(self, transport: paramiko.Transport | None = None) -> None:
        """Forget the clients of a closed transport (they died with it)."""
        with self._cond:
            self._reset(transport)

    def _take(self, transport: paramiko.Transport) -> tuple[paramiko.SFTPClient, bool]:
        """An idle client, else a new one (`extra` when it holds an exec slot)."""
        with self._cond:
            if self._transport is not transport:
                self._reset(transport)
            self._want += 1
            while not self._idle:
                extra = self._count > 0
                if not extra or self.conn.channels.acquire(blocking=False):
                    self._count += 1
                    break
                self._cond.wait()
                if self._transport is not transport:  # reconnected meanwhile
                    raise paramiko.SSHException("the connection was replaced")
            else:
                return self._idle.pop()
        try:
            client = self._open(transport)
        except BaseException:
            self._give(transport, None, extra, False)
            raise
        return client, extra

    def _open(self, transport: paramiko.Transport) -> paramiko.SFTPClient:
        channel = self.conn.open_channel(transport)
        try:
            channel.invoke_subsystem("sftp")
            channel.settimeout(self.conn.io_timeout)  # else a frozen host hangs us
            return paramiko.SFTPClient(channel)
        except (paramiko.SSHException, EOFError) as exc:
            channel.close()
            # A refused subsystem closes only this channel; a dropped connection closes all.
            if transport.is_active():
                raise SftpUnavailable() from exc
            raise

    def _give(self, transport: paramiko.Transport, client: Any, extra: bool, ok: bool) -> None:
        """Back to the pool; idle extra clients close once callers no longer need them."""
        closing = [] if ok else [client]
        with self._cond:
            if self._transport is not transport:
                closing = [client]
                if extra:
                    self.conn.channels.release()
            else:
                self._want -= 1
                if ok:
                    self._idle.append((client, extra))
                else:
                    self._count -= 1
                    if extra:
                        self.conn.channels.release()
                idle = self._idle
                surplus = max(0, len(idle) - max(self._want, 1))
                for spare in [e for e in idle if e[1]][:surplus]:
                    idle.remove(spare)
                    self._count -= 1
                    self.conn.channels.release()
                    closing.append(spare[0])
            self._cond.notify()
        for done in closing:
            if done is not None:
                with contextlib.suppress(Exception):
                    done.close()

    def _reset(self, transport: paramiko.Transport | None) -> None:
        """The caller holds the condition's lock."""
        for _, extra in self._idle:
            if extra:
                self.conn.channels.release()
        self._transport, self._idle = transport, []
        self._count = self._want = 0
        self._cond.notify_all()


def realpath(sftp: paramiko.SFTPClient, path: str) -> str:
    real = sftp.normalize(path)
    sftp.stat(real)  # normalize may accept a dangling final component
    return real
