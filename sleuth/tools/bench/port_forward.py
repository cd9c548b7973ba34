"""Reaching a host's server from this machine, for run_benchmark's where="local": directly
on the local host, else through an SSH port forward whose round trip is measured."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

from sleuth.errors import ErrorKind
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.bench.metrics import dist
from sleuth.tools.bench.models import Dist
from sleuth.tools.results import ToolError


@contextmanager
def reach(host: SandboxedHost, endpoint: str, port: int) -> Iterator[tuple[str, Dist | None]]:
    """A URL on this machine for `endpoint` (http://127.0.0.1:PORT, the host's server as
    the host sees it): itself when the host is local, else a forward to its port, with the
    forward's round trips."""
    if isinstance(host.host, LocalHost):
        yield endpoint, None
        return
    transport = _ssh_transport(host)
    with PortForward(transport, port) as local_port:
        url = f"http://127.0.0.1:{local_port}"
        try:
            rtt = round_trips(url)
        except OSError as exc:
            raise ToolError(
                f"nothing answered at {endpoint} on host {host.name!r} through the SSH "
                f"forward ({exc}); is the server running there?"
            ) from exc
        yield url, rtt


def _ssh_transport(host: SandboxedHost) -> Any:
    transport = host.host.transport()
    if transport is None:
        raise ToolError(
            f"host {host.name!r} is not an SSH host, so where='local' cannot forward a port "
            "to it; use where='remote'",
            ErrorKind.INVALID_INPUT,
        )
    return transport


class PortForward:
    """A local listening socket whose connections are tunnelled to host:127.0.0.1:port."""

    def __init__(self, transport: Any, remote_port: int) -> None:
        self.transport, self.remote_port = transport, remote_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        port: int = self.listener.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.thread.join(timeout=2)
        self.listener.close()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, peer = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                channel = self.transport.open_channel(
                    "direct-tcpip", ("127.0.0.1", self.remote_port), peer, timeout=10
                )
            except Exception:  # the host refused the forward: drop this connection only
                conn.close()
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst in ((conn, channel), (channel, conn)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()


def _pump(src: Any, dst: Any) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for end in (src, dst):
            with suppress(OSError):
                end.close()


def round_trips(url: str, count: int = 5) -> Dist:
    """HTTP round trips of GET /v1/models through `url`, one connection reused."""
    parts = urlsplit(url)
    times = []
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = s.makefile("rb")
        for _ in range(count):
            start = time.perf_counter()
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            times.append(time.perf_counter() - start)
    return dist(times)
