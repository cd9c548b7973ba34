"""One reused SSH connection to a host: made on first use, re-made after a drop, and the
channels opened on it.

```python
conn = Connection("gpu1", "gpu1", known_hosts=Path("~/.config/sleuth/known_hosts").expanduser())
result, reconnected = conn.call(lambda t: exec_argv(conn, t, ["uname", "-a"], 30, 4096, None))
```

- Each transport (and each jump host's before it) is opened by `login.open_transport`.
- `call(op)` runs any operation on the live transport; a dropped connection is re-made and,
  where the operation may be repeated, it runs again. A host that leaves a request unanswered
  is a timeout, and its connection is closed so that the next call connects afresh.
- `channels` bounds the channels open at once: commands (`channel_exec`), SFTP clients beyond
  the first (`sftp`) and the resident program (`program`) each hold a slot.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Required, TypedDict, TypeVar

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.ssh.endpoint import Endpoint, load_ssh_config, resolve
from sleuth.hosts.ssh.known_hosts import HostKeyError
from sleuth.hosts.ssh.login import Login, open_transport

T = TypeVar("T")

RECONNECT_ATTEMPTS = 4
MAX_CHANNELS = 8
"""Concurrent exec channels per host; sshd's default MaxSessions is 10 and SFTP holds one."""
DROPS = (EOFError, OSError, paramiko.SSHException)
"""What paramiko raises when the connection under a call goes away."""


class LinkOptions(TypedDict, total=False):
    """Connection's keyword options, as SSHHost takes them and hands them on."""

    known_hosts: Required[Path]
    accept_new: bool
    ssh_config_path: Path | None
    user_known_hosts: Path | None
    connect_timeout: float
    io_timeout: float


class Dropped(HostError):
    """The connection went away; the call may be retried on a new one."""

    default_kind = ErrorKind.DROPPED


class Connection:
    """A transport (and its jump hosts) made on first use and re-made after a drop."""

    def __init__(
        self,
        name: str,
        target: str,
        *,
        known_hosts: Path,
        accept_new: bool = False,
        ssh_config_path: Path | None = None,
        user_known_hosts: Path | None = None,
        connect_timeout: float = 10,
        io_timeout: float = 20,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.name, self.target = name, target
        self.io_timeout = io_timeout
        """A request unanswered this long means the host stopped answering."""
        self.login = Login(
            name=name,
            known_hosts=known_hosts,
            accept_new=accept_new,
            ssh_config_path=ssh_config_path or Path("~/.ssh/config").expanduser(),
            user_known_hosts=user_known_hosts or Path("~/.ssh/known_hosts").expanduser(),
            connect_timeout=connect_timeout,
        )
        self.on_close = on_close
        """Called (under no lock of ours) whenever the transport is closed or replaced."""
        self.bytes_received = 0
        """Bytes that crossed the wire into this process, all connections together."""
        self.reconnects = 0
        self.channels = threading.BoundedSemaphore(MAX_CHANNELS)
        """Open channels; the SFTP pool takes a slot for each client beyond its first."""
        self.transport: paramiko.Transport | None = None
        self.endpoint: Endpoint | None = None
        self.auth_used = ""
        self._lock = threading.RLock()
        self._count_lock = threading.Lock()
        self._jumps: list[paramiko.Transport] = []
        self._connected_once = False

    # -- connecting --

    def live(self) -> tuple[paramiko.Transport, bool]:
        """The live transport, connecting if needed. True when this replaced a dropped one."""
        with self._lock:
            if self.transport is not None and self.transport.is_active():
                return self.transport, False
            again = self._connected_once
            self._close_transports()
            try:
                self.transport = self._connect()
            except HostKeyError:
                raise
            except HostError as exc:
                if again:  # a restarting host refuses for a moment: let the caller retry
                    raise Dropped(str(exc)) from exc
                raise
            self._connected_once = True
            if again:
                self.reconnects += 1
            return self.transport, again

    def _connect(self) -> paramiko.Transport:
        config = load_ssh_config(self.login.ssh_config_path)
        target = resolve(self.target, config)
        via: paramiko.Transport | None = None
        for hop in target.jumps:
            via, self.auth_used = open_transport(self.login, resolve(hop, config), via, self._count)
            self._jumps.append(via)
        transport, self.auth_used = open_transport(self.login, target, via, self._count)
        self.endpoint = target
        return transport

    def _count(self, size: int) -> None:
        with self._count_lock:
            self.bytes_received += size

    # -- calling with reconnection --

    def call(self, op: Callable[[paramiko.Transport], T], *, retry: bool = True) -> tuple[T, bool]:
        """Run `op` on the live transport; on a dropped connection reconnect and, when the call
        may be repeated, run it again. Returns the result and whether it reconnected."""
        reconnected = False
        retrying = Retrying(
            stop=stop_after_attempt(RECONNECT_ATTEMPTS),
            wait=wait_exponential(multiplier=0.2, max=2),
            retry=retry_if_exception_type(Dropped),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                transport, fresh = self.live()
                reconnected |= fresh
                try:
                    return op(transport), reconnected
                except DROPS as exc:
                    if _is_unanswered(exc):
                        # The link is up but nothing comes back (a frozen host, dropped
                        # packets): close it so the next call connects afresh, not waits again.
                        self.forget(transport)
                        raise HostError(
                            f"host {self.name!r} stopped answering (no reply in "
                            f"{self.io_timeout:g} s); the connection was closed and the next "
                            f"call reconnects",
                            ErrorKind.TIMEOUT,
                        ) from exc
                    if not _is_drop(transport, exc):
                        raise
                    self.forget(transport)
                    if not retry:
                        raise HostError(
                            f"the connection to host {self.name!r} dropped while a command "
                            f"ran; it was not retried because it may change the host. Check "
                            f"the host's state before running it again",
                            ErrorKind.DROPPED,
                        ) from exc
                    raise Dropped(f"the connection to host {self.name!r} dropped") from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def forget(self, transport: paramiko.Transport) -> None:
        with self._lock:
            if self.transport is transport:
                self._close_transports()

    def _close_transports(self) -> None:
        for transport in [self.transport, *reversed(self._jumps)]:
            if transport is not None:
                transport.close()
        self.transport, self._jumps = None, []
        if self.on_close is not None:
            self.on_close()

    def open_channel(self, transport: paramiko.Transport) -> paramiko.Channel:
        """A session channel; TimeoutError when the host leaves the request unanswered."""
        started = time.monotonic()
        try:
            return transport.open_session(timeout=self.login.connect_timeout)
        except paramiko.SSHException as exc:
            if transport.is_active() and time.monotonic() - started >= self.login.connect_timeout:
                raise TimeoutError("no answer to a channel request") from exc
            raise

    def open_program(self, transport: paramiko.Transport, argv: list[str]) -> paramiko.Channel:
        """A session channel running `argv` (as a shell string: SSH carries one, each
        argument quoted), reads timing out after `io_timeout`."""
        channel = self.open_channel(transport)
        channel.settimeout(self.io_timeout)
        channel.exec_command("exec " + shlex.join(argv))
        return channel

    def close(self) -> None:
        with self._lock:
            self._close_transports()


def _is_drop(transport: paramiko.Transport, exc: BaseException) -> bool:
    """Whether `exc` means the connection is gone, rather than a file error from SFTP."""
    if isinstance(exc, EOFError) or (isinstance(exc, OSError) and exc.errno is None):
        # A write can fail before paramiko's reader thread sees the drop and ends.
        transport.join(0.5)
    return not transport.is_active()


def _is_unanswered(exc: BaseException) -> bool:
    """A request the host left unanswered, as opposed to a closed connection or a file error."""
    return isinstance(exc, TimeoutError)
