"""Opening one logged-in SSH transport to an endpoint: the TCP socket (or a channel through
the jump host before it), the handshake, the host key check, then public-key authentication.

```python
transport, auth_used = open_transport(conn.login, resolve("gpu1", config), None, tally=print)
```

- Host keys are checked before authenticating (`known_hosts.HostKeyCheck`); ssh-agent keys,
  IdentityFile entries, then the default keys are offered.
- Every failure is a HostError that names the endpoint and the host, says what to fix, and
  carries its kind (unreachable, timeout, auth; HostKeyError for a key that does not match).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.ssh.endpoint import Endpoint
from sleuth.hosts.ssh.known_hosts import (
    HostKeyCheck,
    host_key_name,
    key_label,
    prefer_known_key_types,
    read_known_hosts,
)

WINDOW_BYTES = 8 << 20
"""A larger channel window than paramiko's 2 MiB keeps bulk output flowing on fast links."""
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")


@dataclass(frozen=True)
class Login:
    """How one configured host is reached, checked and logged into."""

    name: str
    """The host's name in Sleuth, for messages."""
    known_hosts: Path
    """Sleuth's own known_hosts file: checked, and where an accepted new key is written."""
    accept_new: bool
    ssh_config_path: Path
    user_known_hosts: Path
    """The user's known_hosts (`~/.ssh/known_hosts`), checked as well."""
    connect_timeout: float


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


def open_transport(
    login: Login, end: Endpoint, via: paramiko.Transport | None, tally: Callable[[int], None]
) -> tuple[paramiko.Transport, str]:
    """A transport to `end` (through `via`, a jump host's, if given), its host key checked and
    logged in; and which key logged in, from where. `tally` counts the bytes received."""
    sock = _socket(login, end, via, tally)
    transport = paramiko.Transport(sock, default_window_size=WINDOW_BYTES)
    # paramiko's own rekey (after 512 MiB) can stall a channel reading a large output:
    # "Key-exchange timed out waiting for key negotiation" (paramiko#822). OpenSSH servers
    # rekey on their own schedule, so leave it to them, on this connection only.
    transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = 1 << 62
    name = host_key_name(end.hostname, end.port)
    files = [login.user_known_hosts, login.known_hosts]
    started = time.monotonic()
    try:
        prefer_known_key_types(transport, [e for p in files for e in read_known_hosts(p, name)])
        transport.start_client(timeout=login.connect_timeout)
        HostKeyCheck(
            name, transport.get_remote_server_key(), files, login.accept_new, login.known_hosts
        ).run()
        return transport, _authenticate(login, transport, end)
    except HostError:
        transport.close()
        raise
    except (paramiko.SSHException, EOFError, OSError) as exc:
        transport.close()
        if time.monotonic() - started >= login.connect_timeout:
            raise HostError(
                f"{end.address} (host {login.name!r}) accepted the connection but did not "
                f"answer the SSH handshake in {login.connect_timeout:g} s: the server is "
                f"frozen or overloaded; it timed out",
                ErrorKind.TIMEOUT,
            ) from exc
        raise HostError(
            f"SSH handshake with {end.address} (host {login.name!r}) failed: {exc or type(exc)}",
            ErrorKind.UNREACHABLE,
        ) from exc


def _socket(
    login: Login, end: Endpoint, via: paramiko.Transport | None, tally: Callable[[int], None]
) -> Any:
    if via is not None:
        try:
            return via.open_channel(
                "direct-tcpip",
                (end.hostname, end.port),
                ("127.0.0.1", 0),
                timeout=login.connect_timeout,
            )
        except paramiko.SSHException as exc:
            raise HostError(
                f"jump host could not reach {end.address} for host {login.name!r}: {exc}",
                ErrorKind.UNREACHABLE,
            ) from exc
    try:
        sock = socket.create_connection((end.hostname, end.port), login.connect_timeout)
    except socket.gaierror as exc:
        raise HostError(
            f"cannot resolve {end.hostname!r} for host {login.name!r}: it is neither a Host "
            f"in {login.ssh_config_path} nor a known hostname. Add it there:\n"
            f"  Host {end.alias}\n    HostName <address>\n    User <user>",
            ErrorKind.UNREACHABLE,
        ) from exc
    except TimeoutError as exc:
        raise HostError(
            f"connecting to {end.address} (host {login.name!r}) timed out after "
            f"{login.connect_timeout:g}s; check the address and that a firewall lets SSH "
            "through",
            ErrorKind.UNREACHABLE,
        ) from exc
    except ConnectionRefusedError as exc:
        raise HostError(
            f"connection refused by {end.address} (host {login.name!r}); is sshd running "
            f"there and listening on port {end.port}?",
            ErrorKind.UNREACHABLE,
        ) from exc
    except OSError as exc:
        raise HostError(
            f"cannot connect to {end.address} (host {login.name!r}): {exc}",
            ErrorKind.UNREACHABLE,
        ) from exc
    # Without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~40 ms to each call.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _CountingSocket(sock, tally)


def _authenticate(login: Login, transport: paramiko.Transport, end: Endpoint) -> str:
    """Offer each candidate key in turn; the one that logged in, and where it came from."""
    tried: list[str] = []
    agent = None
    if not end.identities_only:
        try:
            agent = paramiko.Agent()
        except paramiko.SSHException as exc:  # SSH_AUTH_SOCK names a dead agent
            tried.append(f"ssh-agent (unreachable: {exc})")
    try:
        for label, key in _candidate_keys(end, agent, tried):
            try:
                transport.auth_publickey(end.user, key)
            except paramiko.AuthenticationException:
                tried.append(f"{label} ({key_label(key.get_name())} {key.fingerprint})")
                continue
            return f"{key.get_name()} from {label}"
    finally:
        if agent is not None:
            agent.close()
    listed = "; ".join(tried) or "no keys found (no agent, no IdentityFile, no ~/.ssh/id_*)"
    raise HostError(
        f"{end.user}@{end.address} (host {login.name!r}) refused every key. Tried: {listed}. "
        f"Fix: add your public key to ~{end.user}/.ssh/authorized_keys there "
        f"(`ssh-copy-id -p {end.port} {end.user}@{end.hostname}`), set IdentityFile for "
        f"`Host {end.alias}` in {login.ssh_config_path}, or load the key with `ssh-add`",
        ErrorKind.AUTH,
    )


def _candidate_keys(
    end: Endpoint, agent: paramiko.Agent | None, tried: list[str]
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
