"""`sleuth mcp`: serve Sleuth's tools to an MCP client (Claude Code, Cursor, VS Code, ...)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import (
    EXIT_USAGE,
    FleetConcurrency,
    HostNames,
    HostSpecs,
    err_console,
    fail,
    select_or_exit,
)
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import Settings
from sleuth.mcp.transport import (
    TOKEN_ENV,
    BindError,
    check_bind,
    http_token,
    parse_bind,
    serve_http,
    serve_stdio,
)
from sleuth.tools.context import ToolContext
from sleuth.transcripts.controls import shown
from sleuth.transcripts.seal import Seal


@shared_options(
    "transcripts", "accept_new_host_key", "no_sign", "otlp_endpoint", "otel_content", "config"
)
def mcp(
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at HOST:PORT (e.g. 127.0.0.1:8765) instead of stdio.",
        ),
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help=f"Let --http bind beyond loopback; needs {TOKEN_ENV} (a bearer token).",
        ),
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="NAME",
            help="Another name clients reach --http by (a Host header to accept, e.g. a proxy's "
            "name); repeat for several.",
        ),
    ] = None,
    hosts: HostNames = None,
    fleet: HostSpecs = None,
    fleet_concurrency: FleetConcurrency = None,
    *,
    opts: SharedOptions,
) -> None:
    """Serve Sleuth's sandboxed, audited tools over the Model Context Protocol.

    Each client session is recorded as a transcript; a tool that changes a host asks you
    through the client (elicitation), or is refused when the client cannot ask and no rule in
    sleuth.toml approves it. Without --host or --hosts it serves every configured host and
    group (a client may call a read-only tool on a whole group: host=@GROUP); each session's
    transcript goes to --transcripts. Over --http every request needs the bearer token
    (SLEUTH_MCP_TOKEN, or one made up for the run and printed once), on loopback too.

    Example: sleuth mcp --http 127.0.0.1:8765

    Example: claude mcp add sleuth -- sleuth mcp
    """
    # The MCP SDK (and OpenTelemetry, Starlette, uvicorn through it) only when serving, so
    # `sleuth --help` does not load it.
    from sleuth.mcp.server import build_server
    from sleuth.mcp.state import ServeState

    settings = opts.settings()
    export = opts.tracing(send_each_session=True)
    token = os.environ.get(TOKEN_ENV) or None
    bind = None if http is None else _bind(http, allow_remote, token)
    ctx = _context(settings, hosts, fleet, fleet_concurrency, opts)
    sealed = opts.seal(settings)  # says which key signs, on stderr
    state = ServeState(
        ctx,
        opts.transcripts.absolute(),
        settings,
        seal=lambda: Seal(sealed.signer, sealed.ledger),
    )
    server = build_server(state)
    with export as ctx.tracing:
        try:
            if bind is None:
                serve_stdio(server, state)
            else:
                token = http_token(token, _say)
                serve_http(
                    server, state, bind, token, allow_host or [], _announce(opts.transcripts)
                )
        except KeyboardInterrupt:
            pass
        finally:
            state.end_all()
            ctx.close()


def _bind(http: str, allow_remote: bool, token: str | None) -> tuple[str, int]:
    """--http's address, refused (exit 2) beyond loopback unless allowed and a token is set."""
    try:
        bind = parse_bind(http)
        check_bind(bind[0], allow_remote, token)
    except BindError as exc:
        fail(str(exc), EXIT_USAGE)
    return bind


def _context(
    settings: Settings,
    hosts: list[str] | None,
    fleet: list[str] | None,
    concurrency: int | None,
    opts: SharedOptions,
) -> ToolContext:
    """The hosts and groups served: those named, else every configured host and group."""
    given = bool(hosts or fleet)
    names = hosts if given else list(settings.hosts)
    chosen = select_or_exit(settings, names, fleet if given else list(settings.groups), concurrency)
    return opts.open_chosen(chosen)


def _say(text: str) -> None:
    err_console.print(f"sleuth mcp: {shown(text)}", highlight=False, markup=False, soft_wrap=True)


def _announce(transcripts: Path) -> Callable[[str], None]:
    def say(url: str) -> None:
        err_console.print(
            f"sleuth mcp: streamable HTTP at {url}; transcripts in {transcripts}", highlight=False
        )

    return say
