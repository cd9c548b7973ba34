"""The two ways `sleuth mcp` listens: stdio (one client, one session) and streamable HTTP.

Over HTTP each `Mcp-Session-Id` is one session and one transcript; a client's DELETE of its
session (or the server stopping) ends that transcript. Loopback is not trust: the bearer token
is checked on every request, whatever the bind address (a web page can reach a loopback port
through the browser), and the Host and Origin headers must name this server (the SDK's
DNS-rebinding protection, on for every address). Binding beyond loopback also needs
--allow-remote and a token the user chose.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.transport_security import TransportSecuritySettings

    from sleuth.mcp.state import ServeState

TOKEN_ENV = "SLEUTH_MCP_TOKEN"
MIN_TOKEN = 16
MCP_PATH = "/mcp"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BindError(Exception):
    """`--http` names an address it may not bind; the message says what to add."""


def http_token(given: str | None, say: Callable[[str], None]) -> str:
    """The token HTTP clients must send: `given` (from SLEUTH_MCP_TOKEN), else a random one
    for this run, told once to the person who started the server."""
    if given:
        return given
    token = secrets.token_urlsafe(32)
    say(
        f"{TOKEN_ENV} is not set, so this run's token is {token}\n"
        f"clients send it as `Authorization: Bearer {token}` (e.g. `claude mcp add --transport "
        f'http sleuth URL --header "Authorization: Bearer {token}"`); set {TOKEN_ENV} to '
        "choose a token that outlives this run"
    )
    return token


def serve_stdio(server: Server[ServeState], state: ServeState) -> None:
    # The SDK is imported by the command that serves, never by `sleuth` as a whole.
    from mcp.server.stdio import stdio_server

    def terminated(signum: int, frame: object) -> None:
        # A client that stops its server with SIGTERM still gets session_ended written. The
        # loop cannot be unwound here (a worker thread is blocked reading stdin), so exit.
        state.end_all()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_bind(text: str) -> tuple[str, int]:
    """`127.0.0.1:8765`, `[::1]:8765` or `:8765` (loopback) as host and port."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BindError(f"--http {text!r}: give HOST:PORT, e.g. --http 127.0.0.1:8765")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def allowed_hosts(host: str, port: int, extra: list[str]) -> list[str]:
    """The Host header values a request may carry: the bind address as a client writes it
    (both forms of an IPv6 address), loopback names for a loopback bind, this machine's names
    for a wildcard bind, and `extra` (`--allow-host`, for a name in front of the server)."""
    names = {host, *extra}
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is not None:
        names.add(str(address))
        if address.is_loopback:
            names.add("localhost")
        if address.is_unspecified:
            names |= {socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "::1"}
    return sorted(f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names)


def transport_security(host: str, port: int, extra: list[str]) -> TransportSecuritySettings:
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = allowed_hosts(host, port, extra)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")],
    )


def check_bind(host: str, allow_remote: bool, token: str | None) -> None:
    if is_loopback(host):
        return
    if not allow_remote:
        raise BindError(
            f"--http {host}: binding beyond loopback lets other machines run tools on your "
            f"hosts; add --allow-remote and set {TOKEN_ENV} to a long random token"
        )
    if not token or len(token) < MIN_TOKEN:
        raise BindError(
            f"--http {host} --allow-remote needs {TOKEN_ENV} set to a token of 16 characters or "
            f"more (clients send it as `Authorization: Bearer <token>`)"
        )


def serve_http(
    server: Server[ServeState],
    state: ServeState,
    bind: tuple[str, int],
    token: str,
    extra_hosts: list[str],
    on_ready: Callable[[str], None],
) -> None:
    import uvicorn

    host, port = bind
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=transport_security(host, port, extra_hosts),
    )
    guarded = guard(app, state, token)
    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    url_host = f"[{host}]" if ":" in host else host
    on_ready(f"http://{url_host}:{port}{MCP_PATH}")
    web.run()


def guard(app: ASGIApp, state: ServeState, token: str) -> ASGIApp:
    """Check the bearer token on every request; end a session's transcript when its client
    deletes it."""
    expected = f"Bearer {token}".encode()

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if not hmac.compare_digest(given, expected):
            await _unauthorized(send)
            return
        session = headers.get(b"mcp-session-id")
        if scope.get("method") != "DELETE" or not session:
            await app(scope, receive, send)
            return
        key = session.decode("latin-1")

        async def ending(message: MutableMapping[str, Any]) -> None:
            # The SDK accepted the DELETE: close the transcript before the client hears so.
            if message["type"] == "http.response.start" and message["status"] < 300:
                await anyio.to_thread.run_sync(state.end, key)
            await send(message)

        await app(scope, receive, ending)

    return wrapped


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"error": f"missing or wrong bearer token; send `Authorization: Bearer ${TOKEN_ENV}`"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": body})
