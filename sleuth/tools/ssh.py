"""A host reached over SSH: one paramiko Transport, reused by every call.

```python
host = SSHHost("gpu1", "gpu1", known_hosts=Path("~/.config/sleuth/known_hosts").expanduser())
host.run(["sed", "-n", "1,20p", "--", "/models/x/config.json"], timeout=30, max_bytes=64_000)
```

- The target resolves as `ssh` resolves it: `~/.ssh/config` (HostName, User, Port,
  IdentityFile, IdentitiesOnly, ProxyJump), ssh-agent, then the default keys.
- Host keys are checked against the user's known_hosts and Sleuth's own file
  (hashed entries, `[host]:port`, `@revoked`). Unknown keys are refused unless
  `accept_new` (then stored in Sleuth's file); changed keys are always refused.
- Commands run as `timeout -k 2 T argv...` so that a timeout kills the remote
  process group: closing a channel does not stop the remote process, and sshd
  refuses `signal` requests for root.
- stat, realpath and byte ranges go through SFTP, which skips the remote login
  shell and its start-up files (tens of milliseconds per exec on some hosts).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import getpass
import hashlib
import hmac
import re
import shlex
import socket
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from sleuth.tools.hosts import STDERR_CAP, HostError, RunResult, StatResult, kind_of

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
SFTP_CHUNK = 32 * 1024
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")
_DROPS = (EOFError, OSError, paramiko.SSHException)
"""What paramiko raises when the connection under a call goes away."""


class HostKeyError(HostError):
    """The server's host key is unknown, changed or revoked."""


class _Dropped(HostError):
    """The connection went away; the call may be retried on a new one."""


# --- host keys ---------------------------------------------------------------------------


def fingerprint(blob: bytes) -> str:
    """`SHA256:...` exactly as `ssh-keygen -lf` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode()
    return "SHA256:" + digest.rstrip("=")


def key_label(key_type: str) -> str:
    """The key type as `ssh-keygen -l` names it (ED25519, ECDSA, RSA)."""
    if key_type.startswith("ecdsa-"):
        return "ECDSA"
    if key_type in ("ssh-rsa", "rsa-sha2-256", "rsa-sha2-512"):
        return "RSA"
    return key_type.removeprefix("ssh-").upper()


def _blob_type(blob: bytes) -> str:
    size = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + size].decode(errors="replace")


def host_key_name(hostname: str, port: int) -> str:
    """How known_hosts names a host: bare on port 22, else `[host]:port`."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


@dataclass(frozen=True)
class KnownKey:
    file: Path
    line: int
    marker: str | None
    """`@revoked`, `@cert-authority` or None."""
    key_type: str
    blob: bytes

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _pattern_matches(patterns: str, name: str) -> bool:
    if patterns.startswith("|1|"):
        try:
            salt_b64, hash_b64 = patterns[3:].split("|", 1)
            salt, want = base64.b64decode(salt_b64), base64.b64decode(hash_b64)
        except (ValueError, binascii.Error):
            return False
        got = hmac.new(salt, name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(got, want)
    matched = False
    for pattern in patterns.lower().split(","):
        negated = pattern.startswith("!")
        if _glob(pattern.removeprefix("!")).fullmatch(name.lower()):
            if negated:
                return False
            matched = True
    return matched


def _glob(pattern: str) -> re.Pattern[str]:
    """OpenSSH host patterns know only `*` and `?`; brackets are literal (`[host]:port`)."""
    return re.compile("".join({"*": ".*", "?": "."}.get(c, re.escape(c)) for c in pattern))


def read_known_hosts(path: Path, name: str) -> list[KnownKey]:
    """Entries of `path` for host `name`, marker lines included (paramiko drops those)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HostError(f"cannot read known_hosts file {path}: {exc.strerror}") from exc
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if len(fields) < 3 or not _pattern_matches(fields[0], name):
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except binascii.Error:
            continue
        found.append(KnownKey(path, number, marker, fields[1], blob))
    return found


@dataclass
class HostKeyCheck:
    """The verdict on a server's key against every known_hosts file."""

    name: str
    offered: paramiko.PKey
    files: list[Path]
    accept_new: bool
    store: Path

    def run(self) -> None:
        blob = self.offered.asbytes()
        entries = [entry for path in self.files for entry in read_known_hosts(path, self.name)]
        revoked = [e for e in entries if e.marker == "@revoked" and e.blob == blob]
        if revoked:
            raise HostKeyError(
                f"host key of {self.name} ({self._offered_text()}) is marked @revoked in "
                f"{revoked[0].where()}; refusing to connect. The host must get a new key; "
                f"then remove the old entry and accept the new one with --accept-new-host-key"
            )
        plain = [e for e in entries if e.marker is None]
        if any(e.blob == blob for e in plain):
            return
        if plain:
            raise HostKeyError(self._changed_text(plain))
        if not self.accept_new:
            raise HostKeyError(self._unknown_text())
        self._store()

    def _offered_text(self) -> str:
        return f"{key_label(self.offered.get_name())} key {fingerprint(self.offered.asbytes())}"

    def _unknown_text(self) -> str:
        files = ", ".join(str(p) for p in self.files)
        return (
            f"host {self.name} is not in known_hosts ({files}); it offered "
            f"{self._offered_text()}. Compare that fingerprint with the host's own "
            f"(`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` there). If it matches, rerun with "
            f"--accept-new-host-key to store it in {self.store}"
        )

    def _changed_text(self, known: list[KnownKey]) -> str:
        expected = "; ".join(
            f"{key_label(_blob_type(e.blob))} key {fingerprint(e.blob)} ({e.where()})"
            for e in known
        )
        first = known[0]
        return (
            f"HOST KEY CHANGED for {self.name}: expected {expected}, but the host offered "
            f"{self._offered_text()}. Someone may be intercepting the connection, or the "
            f"host was reinstalled. Refusing to connect. If the new key is right, delete line "
            f"{first.line} of {first.file} (`ssh-keygen -R '{self.name}' -f {first.file}`) and "
            f"connect again with --accept-new-host-key"
        )

    def _store(self) -> None:
        self.store.parent.mkdir(parents=True, exist_ok=True)
        line = f"{self.name} {self.offered.get_name()} {self.offered.get_base64()}\n"
        with self.store.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.store.chmod(0o600)


def _prefer(transport: paramiko.Transport, known: list[KnownKey]) -> None:
    """Ask for known host key types first, as OpenSSH does, so a host with several keys is
    not mistaken for a changed one; and for the fastest cipher."""
    types = [e.key_type for e in known if e.marker is None]
    if "ssh-rsa" in types:
        types += ["rsa-sha2-512", "rsa-sha2-256"]
    options = transport.get_security_options()
    # AES-GCM needs no separate MAC pass; it moves bulk output about twice as fast here.
    ciphers = list(options.ciphers)
    gcm = [c for c in ciphers if c.endswith("-gcm@openssh.com")]
    options.ciphers = gcm + [c for c in ciphers if c not in gcm]
    supported = list(options.key_types)
    first = [t for t in supported if t in types]
    options.key_types = first + [t for t in supported if t not in first]


# --- where a target lives ----------------------------------------------------------------

_TARGET = re.compile(r"^(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:@]+)(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class Endpoint:
    """One hop: where to connect and as whom, resolved from ssh config."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[Path]
    identities_only: bool
    jumps: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"


def resolve(target: str, config: paramiko.SSHConfig) -> Endpoint:
    """Resolve `alias` or `user@host:port` the way `ssh` does."""
    match = _TARGET.match(target.strip())
    if not match:
        raise HostError(f"cannot parse SSH target {target!r}; use an alias or user@host:port")
    host = match["host"].strip("[]")
    found = config.lookup(host)
    jumps = found.get("proxyjump", "none")
    return Endpoint(
        alias=host,
        hostname=found.get("hostname", host),
        port=int(match["port"] or found.get("port", 22)),
        user=match["user"] or found.get("user") or getpass.getuser(),
        identity_files=[Path(p).expanduser() for p in found.get("identityfile", [])],
        identities_only=found.get("identitiesonly", "no").lower() == "yes",
        jumps=[] if jumps.lower() == "none" else [j.strip() for j in jumps.split(",")],
    )


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


# --- the host ----------------------------------------------------------------------------


class SSHHost:
    """A remote machine over one reused SSH connection. Connects on first use; thread-safe."""

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
    ) -> None:
        self.name, self.target = name, target
        self.io_timeout = io_timeout
        """A file request unanswered this long means the host stopped answering."""
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.ssh_config_path = ssh_config_path or Path("~/.ssh/config").expanduser()
        self.user_known_hosts = user_known_hosts or Path("~/.ssh/known_hosts").expanduser()
        self.connect_timeout = connect_timeout
        self.bytes_received = 0
        """Bytes that crossed the wire into this process, all connections together."""
        self.bytes_read_sftp = 0
        """File payload bytes read by `read_range`."""
        self.reconnects = 0
        self._lock = threading.RLock()
        self._count_lock = threading.Lock()
        self._sftp_cond = threading.Condition()
        self._sftp_transport: paramiko.Transport | None = None
        self._sftp_idle: list[tuple[paramiko.SFTPClient, bool]] = []
        self._sftp_count = self._sftp_want = 0
        self._channels = threading.BoundedSemaphore(MAX_CHANNELS)
        self._transport: paramiko.Transport | None = None
        self._jumps: list[paramiko.Transport] = []
        self._connected_once = False
        self._auth_used = ""
        self._endpoint: Endpoint | None = None

    # -- connecting --

    def _config(self) -> paramiko.SSHConfig:
        if self.ssh_config_path.is_file():
            return paramiko.SSHConfig.from_path(str(self.ssh_config_path))
        return paramiko.SSHConfig()

    def _transport_now(self) -> tuple[paramiko.Transport, bool]:
        """The live transport, connecting if needed. True when this replaced a dropped one."""
        with self._lock:
            if self._transport is not None and self._transport.is_active():
                return self._transport, False
            again = self._connected_once
            self._close_transports()
            try:
                self._transport = self._connect()
            except HostKeyError:
                raise
            except HostError as exc:
                if again:  # a restarting host refuses for a moment: let the caller retry
                    raise _Dropped(str(exc)) from exc
                raise
            self._connected_once = True
            if again:
                self.reconnects += 1
            return self._transport, again

    def _connect(self) -> paramiko.Transport:
        config = self._config()
        target = resolve(self.target, config)
        via: paramiko.Transport | None = None
        for hop in target.jumps:
            via = self._open(resolve(hop, config), via)
            self._jumps.append(via)
        transport = self._open(target, via)
        self._endpoint = target
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
            _prefer(transport, [e for p in files for e in read_known_hosts(p, name)])
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
                    f"frozen or overloaded; it timed out"
                ) from exc
            raise HostError(
                f"SSH handshake with {end.address} (host {self.name!r}) failed: {exc or type(exc)}"
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
                    f"jump host could not reach {end.address} for host {self.name!r}: {exc}"
                ) from exc
            return channel
        try:
            sock = socket.create_connection((end.hostname, end.port), self.connect_timeout)
        except socket.gaierror as exc:
            raise HostError(
                f"cannot resolve {end.hostname!r} for host {self.name!r}: it is neither a Host "
                f"in {self.ssh_config_path} nor a known hostname. Add it there:\n"
                f"  Host {end.alias}\n    HostName <address>\n    User <user>"
            ) from exc
        except TimeoutError as exc:
            raise HostError(
                f"connecting to {end.address} (host {self.name!r}) timed out after "
                f"{self.connect_timeout:g}s; check the address and that a firewall lets SSH through"
            ) from exc
        except ConnectionRefusedError as exc:
            raise HostError(
                f"connection refused by {end.address} (host {self.name!r}); is sshd running "
                f"there and listening on port {end.port}?"
            ) from exc
        except OSError as exc:
            raise HostError(f"cannot connect to {end.address} (host {self.name!r}): {exc}") from exc
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
                self._auth_used = f"{key.get_name()} from {label}"
                return
        finally:
            if agent is not None:
                agent.close()
        listed = "; ".join(tried) or "no keys found (no agent, no IdentityFile, no ~/.ssh/id_*)"
        raise HostError(
            f"{end.user}@{end.address} (host {self.name!r}) refused every key. Tried: {listed}. "
            f"Fix: add your public key to ~{end.user}/.ssh/authorized_keys there "
            f"(`ssh-copy-id -p {end.port} {end.user}@{end.hostname}`), set IdentityFile for "
            f"`Host {end.alias}` in {self.ssh_config_path}, or load the key with `ssh-add`"
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

    def _call(self, op: Callable[[paramiko.Transport], T], *, retry: bool = True) -> tuple[T, bool]:
        """Run `op` on the live transport; on a dropped connection reconnect and, when the call
        may be repeated, run it again. Returns the result and whether it reconnected."""
        reconnected = False
        retrying = Retrying(
            stop=stop_after_attempt(RECONNECT_ATTEMPTS),
            wait=wait_exponential(multiplier=0.2, max=2),
            retry=retry_if_exception_type(_Dropped),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                transport, fresh = self._transport_now()
                reconnected |= fresh
                try:
                    return op(transport), reconnected
                except _DROPS as exc:
                    if _is_unanswered(exc):
                        # The link is up but nothing comes back (a frozen host, dropped
                        # packets): close it so the next call connects afresh, not waits again.
                        self._forget(transport)
                        raise HostError(
                            f"host {self.name!r} stopped answering (no reply in "
                            f"{self.io_timeout:g} s); the connection was closed and the next "
                            f"call reconnects"
                        ) from exc
                    if not _is_drop(transport, exc):
                        raise
                    self._forget(transport)
                    if not retry:
                        raise HostError(
                            f"the connection to host {self.name!r} dropped while a command "
                            f"ran; it was not retried because it may change the host. Check "
                            f"the host's state before running it again"
                        ) from exc
                    raise _Dropped(f"the connection to host {self.name!r} dropped") from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _forget(self, transport: paramiko.Transport) -> None:
        with self._lock:
            if self._transport is transport:
                self._close_transports()

    def _close_transports(self) -> None:
        with self._sftp_cond:
            self._sftp_reset(None)
        for transport in [self._transport, *reversed(self._jumps)]:
            if transport is not None:
                transport.close()
        self._transport, self._jumps = None, []

    # -- the Host protocol --

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
            raise HostError("empty command")
        start = time.monotonic()
        command = f"timeout -k {KILL_AFTER_S} {max(timeout, 0.001):.3f} {shlex.join(argv)}"
        result, reconnected = self._call(
            lambda t: self._exec(t, command, list(argv), timeout, max_bytes, stdin), retry=retry
        )
        result.duration_s = time.monotonic() - start
        result.reconnected = reconnected
        if result.exit_code == 127 and result.stderr.startswith(b"timeout: failed to run"):
            raise HostError(f"{argv[0]}: command not found on host {self.name!r}")
        if result.exit_code == 127 and b"timeout: command not found" in result.stderr:
            raise HostError(
                f"host {self.name!r} has no `timeout` command, which Sleuth needs to stop "
                f"remote commands on time; install GNU coreutils there"
            )
        return result

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
        with self._channels:
            channel = transport.open_session(timeout=self.connect_timeout)
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

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            data, _ = self._call(
                lambda t: self._sftp_do(t, lambda s: _read(s, path, offset, length))
            )
        except OSError as exc:
            raise HostError(f"cannot read {path} on host {self.name!r}: {_why(exc)}") from exc
        with self._count_lock:
            self.bytes_read_sftp += len(data)
        return data

    def realpath(self, path: str) -> str:
        def resolve_and_check(sftp: paramiko.SFTPClient) -> str:
            real = sftp.normalize(path)
            sftp.stat(real)  # normalize may accept a dangling final component
            return real

        try:
            real, _ = self._call(lambda t: self._sftp_do(t, resolve_and_check))
        except FileNotFoundError as exc:
            raise HostError(f"no such file or directory on host {self.name!r}: {path}") from exc
        except OSError as exc:
            raise HostError(f"cannot resolve {path} on host {self.name!r}: {_why(exc)}") from exc
        return real

    def stat(self, path: str) -> StatResult:
        try:
            attrs, _ = self._call(lambda t: self._sftp_do(t, lambda s: s.lstat(path)))
        except FileNotFoundError:
            return StatResult(path=path, kind="missing")
        except OSError as exc:
            raise HostError(f"cannot stat {path} on host {self.name!r}: {_why(exc)}") from exc
        mode = attrs.st_mode or 0
        return StatResult(
            path=path,
            kind=kind_of(mode) if stat_mod.S_IFMT(mode) else "other",
            size=attrs.st_size or 0,
            mtime=float(attrs.st_mtime or 0),
        )

    def _sftp_do(self, transport: paramiko.Transport, op: Callable[[paramiko.SFTPClient], T]) -> T:
        # paramiko's SFTPClient loses responses when threads wait on it at once, so a client
        # serves one thread at a time; concurrent callers get a small pool of clients.
        client, extra = self._sftp_take(transport)
        ok = False
        try:
            result = op(client)
            ok = True
        except OSError as exc:
            ok = exc.errno is not None  # a file error leaves the client usable
            raise
        finally:
            self._sftp_give(transport, client, extra, ok)
        return result

    def _sftp_take(self, transport: paramiko.Transport) -> tuple[paramiko.SFTPClient, bool]:
        """An idle client, else a new one: the first freely, further ones (`extra`) only
        while an exec slot is free, held until the extra client closes, so that exec and
        SFTP channels together stay within sshd's MaxSessions."""
        with self._sftp_cond:
            if self._sftp_transport is not transport:
                self._sftp_reset(transport)
            self._sftp_want += 1
            while not self._sftp_idle:
                extra = self._sftp_count > 0
                if not extra or self._channels.acquire(blocking=False):
                    self._sftp_count += 1
                    break
                self._sftp_cond.wait()
                if self._sftp_transport is not transport:  # reconnected meanwhile
                    raise paramiko.SSHException("the connection was replaced")
            else:
                return self._sftp_idle.pop()
        try:
            client = paramiko.SFTPClient.from_transport(transport)
            if client is None:
                raise paramiko.SSHException("the host refused the SFTP subsystem")
            channel = client.get_channel()
            if channel is not None:
                channel.settimeout(self.io_timeout)  # else a frozen host hangs us
        except BaseException:
            self._sftp_give(transport, None, extra, False)
            raise
        return client, extra

    def _sftp_give(self, transport: paramiko.Transport, client: Any, extra: bool, ok: bool) -> None:
        """Back to the pool; idle extra clients close once callers no longer need them."""
        closing = [] if ok else [client]
        with self._sftp_cond:
            if self._sftp_transport is not transport:
                closing = [client]
                if extra:
                    self._channels.release()
            else:
                self._sftp_want -= 1
                if ok:
                    self._sftp_idle.append((client, extra))
                else:
                    self._sftp_count -= 1
                    if extra:
                        self._channels.release()
                idle = self._sftp_idle
                surplus = max(0, len(idle) - max(self._sftp_want, 1))
                for spare in [e for e in idle if e[1]][:surplus]:
                    idle.remove(spare)
                    self._sftp_count -= 1
                    self._channels.release()
                    closing.append(spare[0])
            self._sftp_cond.notify()
        for done in closing:
            if done is not None:
                with contextlib.suppress(Exception):
                    done.close()

    def _sftp_reset(self, transport: paramiko.Transport | None) -> None:
        """Forget the clients of a closed transport (they died with it); caller holds the lock."""
        for _, extra in self._sftp_idle:
            if extra:
                self._channels.release()
        self._sftp_transport, self._sftp_idle = transport, []
        self._sftp_count = self._sftp_want = 0
        self._sftp_cond.notify_all()

    def transport(self) -> paramiko.Transport:
        """The live connection (connecting if needed), for port forwards."""
        return self._transport_now()[0]

    def describe(self) -> dict[str, Any]:
        """Address, user, key, host key and round-trip latency, for `sleuth hosts --check`."""
        transport, _ = self._transport_now()
        start = time.monotonic()
        self.run(["true"], timeout=10, max_bytes=1024)
        exec_ms = (time.monotonic() - start) * 1000
        start = time.monotonic()
        self.stat("/")
        sftp_ms = (time.monotonic() - start) * 1000
        end = self._endpoint
        assert end is not None
        server_key = transport.get_remote_server_key()
        return {
            "address": end.address,
            "user": end.user,
            "via": end.jumps,
            "auth_key": self._auth_used,
            "host_key": f"{key_label(server_key.get_name())} {fingerprint(server_key.asbytes())}",
            "exec_latency_ms": round(exec_ms, 2),
            "sftp_latency_ms": round(sftp_ms, 2),
        }

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
    if isinstance(exc, TimeoutError):
        return True
    return isinstance(exc, paramiko.SSHException) and "Timeout opening channel" in str(exc)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _read(sftp: paramiko.SFTPClient, path: str, offset: int, length: int) -> bytes:
    with sftp.open(path, "rb") as fh:
        size = fh.stat().st_size or 0
        if size and length > SFTP_CHUNK:
            # Known size: pipeline the chunk requests instead of one round trip per 32 KiB.
            length = max(0, min(length, size - offset))
            return b"".join(fh.readv([(offset, length)])) if length else b""
        fh.seek(offset)
        parts, left = [], length
        while left > 0:  # size 0 (e.g. /proc files) or a small read: plain requests
            part = fh.read(min(left, SFTP_CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


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
