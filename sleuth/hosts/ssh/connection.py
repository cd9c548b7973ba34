"""One reused SSH connection to a host: connecting, authenticating, reconnecting, and exec.

```python
conn = Connection("gpu1", "gpu1", known_hosts=Path("~/.config/sleuth/known_hosts").expanduser())
conn.run(["sed", "-n", "1,20p", "--", "/models/x/config.json"], timeout=30, max_bytes=64_000)
```

- Host keys are checked before authenticating (`known_hosts.HostKeyCheck`); ssh-agent keys,
  IdentityFile entries, then the default keys are offered.
- Commands run as `timeout -k 2 T argv...` so that a timeout kills the remote process group:
  closing a channel does not stop the remote process, and sshd refuses `signal` requests
  for root.
- `call(op)` runs any operation on the live transport; a dropped connection is re-made and,
  where the operation may be repeated, it runs again.
"""

from __future__ import annotations

import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import STDERR_CAP, RunResult
from sleuth.hosts.ssh.endpoint import Endpoint, load_ssh_config, resolve
from sleuth.hosts.ssh.known_hosts import (
    HostKeyCheck,
    HostKeyError,
    host_key_name,
    key_label,
    prefer_known_key_types,
    read_known_hosts,
)

T = TypeVar("T")

KILL_AFTER_S = 2
"""Seconds between the remote TERM and KILL (`timeout -k`)."""
LOCAL_GRACE_S = KILL_AFTER_S + 3
"""How long past its timeout we wait for a channel before giving up on it locally."""
RECONNECT_ATTEMPTS = 4
MAX_CHANNELS = 8
"""Concurrent exec channels per host; sshd's default MaxSessions is 10 and SFTP holds one."""
WINDOW_BYTES = 8 << 20
"""A larger channel window than paramiko's 2 MiB keeps bulk output flowing on fast links."""
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")
DROPS = (EOFError, OSError, paramiko.SSHException)
"""What paramiko raises when the connection under a call goes away."""


class Dropped(HostError):
    """The connection went away; the call may be retried on a new one."""

    default_kind = ErrorKind.DROPPED


class _CountingSocket:
    """Wraps the connection's socket to count bytes received, for benchmarks and tests."""

    def __init__(self, sock: Any, tally: Callable[[int], None]) -> None:
        self._sock, self._tally = sock, tally

    def recv(self, size: int) -> bytes:
        data: bytes = self._sock.recv(size)
        self._tally(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


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
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.ssh_config_path = ssh_config_path or Path("~/.ssh/config").expanduser()
        self.user_known_hosts = user_known_hosts or Path("~/.ssh/known_hosts").expanduser()
        self.connect_timeout = connect_timeout
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
        config = load_ssh_config(self.ssh_config_path)
        target = resolve(self.target, config)
        via: paramiko.Transport | None = None
        for hop in target.jumps:
            via = self._open(resolve(hop, config), via)
            self._jumps.append(via)
        transport = self._open(target, via)
        self.endpoint = target
        return transport

    def _open(self, end: Endpoint, via: paramiko.Transport | None) -> paramiko.Transport:
        sock = self._socket(end, via)
        transport = paramiko.Transport(sock, default_window_size=WINDOW_BYTES)
        # paramiko's own rekey (after 512 MiB) can stall a channel reading a large output:
        # "Key-exchange timed out waiting for key negotiation" (paramiko#822). OpenSSH servers
        # rekey on their own schedule, so leave it to them, on this connection only.
        transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = 1 << 62
        name = host_key_name(end.hostname, end.port)
        files = [self.user_known_hosts, self.known_hosts]
        started = time.monotonic()
        try:
            prefer_known_key_types(transport, [e for p in files for e in read_known_hosts(p, name)])
            transport.start_client(timeout=self.connect_timeout)
            HostKeyCheck(
                name, transport.get_remote_server_key(), files, self.accept_new, self.known_hosts
            ).run()
            self._authenticate(transport, end)
        except HostError:
            transport.close()
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            transport.close()
            if time.monotonic() - started >= self.connect_timeout:
                raise HostError(
                    f"{end.address} (host {self.name!r}) accepted the connection but did not "
                    f"answer the SSH handshake in {self.connect_timeout:g} s: the server is "
                    f"frozen or overloaded; it timed out",
                    ErrorKind.TIMEOUT,
                ) from exc
            raise HostError(
                f"SSH handshake with {end.address} (host {self.name!r}) failed: {exc or type(exc)}",
                ErrorKind.UNREACHABLE,
            ) from exc
        return transport

    def _socket(self, end: Endpoint, via: paramiko.Transport | None) -> Any:
        tally = self._count
        if via is not None:
            try:
                channel = via.open_channel(
                    "direct-tcpip",
                    (end.hostname, end.port),
                    ("127.0.0.1", 0),
                    timeout=self.connect_timeout,
                )
            except paramiko.SSHException as exc:
                raise HostError(
                    f"jump host could not reach {end.address} for host {self.name!r}: {exc}",
                    ErrorKind.UNREACHABLE,
                ) from exc
            return channel
        try:
            sock = socket.create_connection((end.hostname, end.port), self.connect_timeout)
        except socket.gaierror as exc:
            raise HostError(
                f"cannot resolve {end.hostname!r} for host {self.name!r}: it is neither a Host "
                f"in {self.ssh_config_path} nor a known hostname. Add it there:\n"
                f"  Host {end.alias}\n    HostName <address>\n    User <user>",
                ErrorKind.UNREACHABLE,
            ) from exc
        except TimeoutError as exc:
            raise HostError(
                f"connecting to {end.address} (host {self.name!r}) timed out after "
                f"{self.connect_timeout:g}s; check the address and that a firewall lets SSH "
                "through",
                ErrorKind.UNREACHABLE,
            ) from exc
        except ConnectionRefusedError as exc:
            raise HostError(
                f"connection refused by {end.address} (host {self.name!r}); is sshd running "
                f"there and listening on port {end.port}?",
                ErrorKind.UNREACHABLE,
            ) from exc
        except OSError as exc:
            raise HostError(
                f"cannot connect to {end.address} (host {self.name!r}): {exc}",
                ErrorKind.UNREACHABLE,
            ) from exc
        # Without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~40 ms to each call.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _CountingSocket(sock, tally)

    def _count(self, size: int) -> None:
        with self._count_lock:
            self.bytes_received += size

    def _authenticate(self, transport: paramiko.Transport, end: Endpoint) -> None:
        tried: list[str] = []
        agent = None
        if not end.identities_only:
            try:
                agent = paramiko.Agent()
            except paramiko.SSHException as exc:  # SSH_AUTH_SOCK names a dead agent
                tried.append(f"ssh-agent (unreachable: {exc})")
        try:
            for label, key in self._candidate_keys(end, agent, tried):
                try:
                    transport.auth_publickey(end.user, key)
                except paramiko.AuthenticationException:
                    tried.append(f"{label} ({key_label(key.get_name())} {key.fingerprint})")
                    continue
                self.auth_used = f"{key.get_name()} from {label}"
                return
        finally:
            if agent is not None:
                agent.close()
        listed = "; ".join(tried) or "no keys found (no agent, no IdentityFile, no ~/.ssh/id_*)"
        raise HostError(
            f"{end.user}@{end.address} (host {self.name!r}) refused every key. Tried: {listed}. "
            f"Fix: add your public key to ~{end.user}/.ssh/authorized_keys there "
            f"(`ssh-copy-id -p {end.port} {end.user}@{end.hostname}`), set IdentityFile for "
            f"`Host {end.alias}` in {self.ssh_config_path}, or load the key with `ssh-add`",
            ErrorKind.AUTH,
        )

    def _candidate_keys(
        self, end: Endpoint, agent: paramiko.Agent | None, tried: list[str]
    ) -> list[tuple[str, paramiko.PKey]]:
        keys: list[tuple[str, paramiko.PKey]] = []
        if agent is not None:
            keys += [("ssh-agent", key) for key in agent.get_keys()]
        files = list(end.identity_files)
        if not end.identities_only or not files:
            files += [Path.home() / ".ssh" / n for n in DEFAULT_KEYS]
        for path in dict.fromkeys(files):
            if not path.is_file():
                continue
            try:
                keys.append((str(path), paramiko.PKey.from_path(path)))
            except paramiko.PasswordRequiredException:
                tried.append(f"{path} (needs a passphrase: load it with `ssh-add {path}`)")
            except (paramiko.SSHException, OSError, ValueError) as exc:
                tried.append(f"{path} (unreadable: {exc})")
        return keys

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

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        max_bytes: int,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> RunResult:
        """Run `argv` on the host, killing its process group after `timeout` seconds.

        `retry=False` is for commands that change the host: if the connection drops while
        one runs, it is reported rather than run a second time.
        """
        if not argv:
            raise HostError("empty command", ErrorKind.INVALID_INPUT)
        start = time.monotonic()
        command = f"timeout -k {KILL_AFTER_S} {max(timeout, 0.001):.3f} {shlex.join(argv)}"
        result, reconnected = self.call(
            lambda t: self._exec(t, command, list(argv), timeout, max_bytes, stdin), retry=retry
        )
        result.duration_s = time.monotonic() - start
        result.reconnected = reconnected
        if result.exit_code == 127 and result.stderr.startswith(b"timeout: failed to run"):
            raise HostError(
                f"{argv[0]}: command not found on host {self.name!r}", ErrorKind.COMMAND_NOT_FOUND
            )
        if result.exit_code == 127 and b"timeout: command not found" in result.stderr:
            raise HostError(
                f"host {self.name!r} has no `timeout` command, which Sleuth needs to stop "
                f"remote commands on time; install GNU coreutils there",
                ErrorKind.COMMAND_NOT_FOUND,
            )
        return result

    def open_channel(self, transport: paramiko.Transport) -> paramiko.Channel:
        """A session channel; TimeoutError when the host leaves the request unanswered."""
        started = time.monotonic()
        try:
            return transport.open_session(timeout=self.connect_timeout)
        except paramiko.SSHException as exc:
            if transport.is_active() and time.monotonic() - started >= self.connect_timeout:
                raise TimeoutError("no answer to a channel request") from exc
            raise

    def _exec(
        self,
        transport: paramiko.Transport,
        command: str,
        argv: list[str],
        timeout: float,
        max_bytes: int,
        stdin: bytes | None,
    ) -> RunResult:
        deadline = time.monotonic() + timeout + LOCAL_GRACE_S
        with self.channels:
            channel = self.open_channel(transport)
            try:
                channel.exec_command(command)
                return self._collect(channel, argv, timeout, deadline, max_bytes, stdin)
            finally:
                channel.close()

    def _collect(
        self,
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
            channel.shutdown_write()
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
            self.channel.shutdown_write()
        except (OSError, EOFError):  # the command exited without reading all of its input
            pass
