"""One command on an exec channel of a live transport: the remote `timeout` around it, both
streams drained with their caps, stdin fed, and its exit read.

```python
result, _ = conn.call(lambda t: exec_argv(conn, t, ["uname", "-a"], 30, 64_000, None))
```

- Commands run as `timeout -k 2 T argv...` so that a timeout kills the remote process group:
  closing a channel does not stop the remote process, and sshd refuses `signal` requests
  for root.
- A channel that has not finished `LOCAL_GRACE_S` past the timeout is closed here: a timed-out
  result either way. A closed connection under a running command is an EOFError, which
  `Connection.call` treats as a drop.
- End of input is sent by `send_eof`, not paramiko's `shutdown_write`, which can send it after
  the channel's CLOSE; OpenSSH then drops the whole connection.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from typing import Any

import paramiko

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import STDERR_CAP, RunResult
from sleuth.hosts.ssh.connection import Connection

KILL_AFTER_S = 2
"""Seconds between the remote TERM and KILL (`timeout -k`)."""
LOCAL_GRACE_S = KILL_AFTER_S + 3
"""How long past its timeout we wait for a channel before giving up on it locally."""


def exec_argv(
    conn: Connection,
    transport: paramiko.Transport,
    argv: list[str],
    timeout: float,
    max_bytes: int,
    stdin: bytes | None,
) -> RunResult:
    """Run `argv` on one of `conn`'s channel slots; at most `max_bytes` of stdout kept."""
    command = f"timeout -k {KILL_AFTER_S} {max(timeout, 0.001):.3f} {shlex.join(argv)}"
    deadline = time.monotonic() + timeout + LOCAL_GRACE_S
    with conn.channels:
        channel = conn.open_channel(transport)
        try:
            channel.exec_command(command)
            return _collect(channel, argv, timeout, deadline, max_bytes, stdin)
        finally:
            channel.close()


def not_run(result: RunResult, name: str) -> HostError | None:
    """Why the remote `timeout` could not start the command, if it could not (exit 127)."""
    if result.exit_code == 127 and result.stderr.startswith(b"timeout: failed to run"):
        return HostError(
            f"{result.argv[0]}: command not found on host {name!r}", ErrorKind.COMMAND_NOT_FOUND
        )
    if result.exit_code == 127 and b"timeout: command not found" in result.stderr:
        return HostError(
            f"host {name!r} has no `timeout` command, which Sleuth needs to stop "
            f"remote commands on time; install GNU coreutils there",
            ErrorKind.COMMAND_NOT_FOUND,
        )
    return None


def send_eof(channel: paramiko.Channel) -> None:
    """End the command's input, never after the channel's CLOSE.

    paramiko's `shutdown_write` builds the EOF under the channel's lock and sends it after
    releasing it. When the command has already ended, the transport thread can answer the
    server's CLOSE in between, so our CLOSE goes out first and the EOF after it; OpenSSH frees
    the channel on our CLOSE and drops the whole connection on the EOF ("ieof packet referred
    to nonexistent channel", paramiko issue #1705, open), taking every call on it along. Here
    the transport's send lock is held from the check to the send, as paramiko's own sends hold
    it (`Transport._send_user_message`): a CLOSE built meanwhile waits for it, and a channel
    closed before the check needs no EOF (paramiko's close sends one)."""
    raw: Any = channel  # paramiko's internals are not in the stubs
    transport: Any = channel.get_transport()
    start = time.monotonic()
    while True:
        transport.clear_to_send.wait(0.1)  # cleared while keys are renegotiated
        if not transport.is_active():
            return
        transport.clear_to_send_lock.acquire()
        if transport.clear_to_send.is_set():
            break
        transport.clear_to_send_lock.release()
        if time.monotonic() > start + transport.clear_to_send_timeout:
            raise paramiko.SSHException("key exchange timed out waiting for key negotiation")
    try:
        with raw.lock:
            eof = None if raw.closed else raw._send_eof()
        if eof is not None:
            transport._send_message(eof)
    finally:
        transport.clear_to_send_lock.release()


def _collect(
    channel: paramiko.Channel,
    argv: list[str],
    timeout: float,
    deadline: float,
    max_bytes: int,
    stdin: bytes | None,
) -> RunResult:
    start = time.monotonic()
    # Both streams share one window: an unread stderr would stall stdout, so it gets a thread.
    err = _ChannelDrain(channel.recv_stderr, STDERR_CAP)
    err.start()
    feeder = _StdinFeeder(channel, stdin) if stdin else None
    if feeder:
        feeder.start()
    else:
        send_eof(channel)
    out = _ChannelDrain(channel.recv, max_bytes)
    local_timeout = not out.drain(channel, deadline)
    if not local_timeout:
        local_timeout = not channel.status_event.wait(max(0.0, deadline - time.monotonic()))
    if local_timeout:
        channel.close()
    err.join(max(0.0, deadline - time.monotonic()) + 1)
    if feeder:
        feeder.join(1)
    status = None if local_timeout or channel.exit_status < 0 else channel.exit_status
    remote_timeout = status in (124, 128 + 9) and time.monotonic() - start >= timeout
    timed_out = local_timeout or remote_timeout
    if status is None and not timed_out and not channel.get_transport().is_active():
        raise EOFError("connection dropped during the command")
    return RunResult(
        argv=argv,
        exit_code=None if timed_out else status,
        stdout=bytes(out.kept),
        stderr=bytes(err.kept),
        stdout_cut=out.cut,
        stderr_cut=err.cut,
        timed_out=timed_out,
    )


class _ChannelDrain(threading.Thread):
    """Read one stream of a channel to its end, keeping the first `cap` bytes."""

    def __init__(self, recv: Callable[[int], bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.recv, self.cap = recv, cap
        self.kept = bytearray()
        self.cut = 0

    def run(self) -> None:
        try:
            while chunk := self.recv(1 << 16):
                self._keep(chunk)
        except (OSError, EOFError):  # the channel was closed under us on a local timeout
            pass

    def drain(self, channel: paramiko.Channel, deadline: float) -> bool:
        """Read in this thread until end of stream; False when `deadline` passed first."""
        while (left := deadline - time.monotonic()) > 0:
            channel.settimeout(left)
            try:
                chunk = self.recv(1 << 16)
            except TimeoutError:
                return False
            if not chunk:
                return True
            self._keep(chunk)
        return False

    def _keep(self, chunk: bytes) -> None:
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        self.cut += max(0, len(chunk) - max(room, 0))


class _StdinFeeder(threading.Thread):
    """Write stdin (if any) then signal end of input; a thread so a large stdin and a large
    output cannot wait on each other."""

    def __init__(self, channel: paramiko.Channel, data: bytes) -> None:
        super().__init__(daemon=True)
        self.channel, self.data = channel, data

    def run(self) -> None:
        try:
            self.channel.sendall(self.data)
            send_eof(self.channel)
        except (OSError, EOFError):  # the command exited without reading all of its input
            pass
