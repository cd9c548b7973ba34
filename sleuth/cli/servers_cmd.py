"""`sleuth servers`: the inference servers Sleuth started on a host, and whether they are alive;
and the list `sleuth ask` prints of the servers its run left running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from sleuth.agent.calls import execute
from sleuth.cli.common import (
    EXIT_ERROR,
    HostName,
    console,
    err_console,
    escape,
    fail,
    print_json,
)
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import LOCAL
from sleuth.tools.context import ToolContext
from sleuth.tools.serving.ctl import IgnoredRecord
from sleuth.tools.serving.status import ignored_line, older_not_shown
from sleuth.tools.serving.stop import stop_command


@shared_options("accept_new_host_key", "as_json", "config")
def servers(host: HostName = LOCAL, *, opts: SharedOptions) -> None:
    """List the servers Sleuth started on a host, alive or not, with the command to stop each.

    Example: sleuth servers --host gpu1
    """
    ctx = opts.open_hosts(opts.settings(), [host])
    try:
        result = execute(ctx, "server_status", {"host": host})
    finally:
        ctx.close()
    if not result.ok:
        fail(f"could not list the servers on {host}: {result.error}", EXIT_ERROR)
    found: list[dict[str, Any]] = result.data["servers"]
    older: int = result.data.get("older_not_shown", 0)
    folder: str = result.data.get("folder", "")
    ignored = [IgnoredRecord.model_validate(i) for i in result.data.get("ignored", [])]
    if opts.as_json:
        print_json(
            {
                "host": host,
                "servers": found,
                "older_not_shown": older,
                "ignored": [i.model_dump() for i in ignored],
            }
        )
        return
    for item in ignored:
        err_console.print(escape(ignored_line(item)), highlight=False, soft_wrap=True)
    if not found and not older:
        console.print(f"no servers started by Sleuth on host {host!r}")
        return
    table = Table(title=f"servers Sleuth started on {host}")
    for column in ("server", "engine", "port", "state", "up (s)", "stop with"):
        table.add_column(column)
    for s in found:
        state = "alive" if s["alive"] else "stopped" if s["stopped"] else "exited"
        stop = s["stop_command"] if s["alive"] else ""
        cells = (s["server_id"], s["engine"], str(s["port"]), state, f"{s['uptime_s']:.0f}", stop)
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)
    if older:
        console.print(escape(older_not_shown(older, folder)), highlight=False, soft_wrap=True)


def launched_by_run(ctx: ToolContext, tool_data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The servers a run's launch_server calls left running, each with its stop command.

    `tool_data` is the run's structured results by call id; a launch result names its host
    and server_id. Hosts that cannot be reached now are reported as unknown, not skipped.
    """
    launched = [
        (d["host"], d["server_id"])
        for d in tool_data.values()
        if isinstance(d, dict) and d.get("ready") and "server_id" in d and "host" in d
    ]
    left = []
    for host, server_id in launched:
        status = execute(ctx, "server_status", {"host": host, "server_id": server_id})
        alive = status.data.get("alive") if status.ok else None
        if alive is False:
            continue
        left.append(
            {
                "host": host,
                "server_id": server_id,
                "alive": alive,
                "stop_command": stop_command(host, server_id),
            }
        )
    return left


def print_left_running(left: list[dict[str, Any]]) -> None:
    """Tell the user, on stderr, which servers are still running and how to stop them."""
    if not left:
        return
    err_console.print(f"[bold]{len(left)} server(s) this run started are still running:[/]")
    for s in left:
        state = "alive" if s["alive"] else "state unknown (host unreachable)"
        err_console.print(
            f"  {escape(s['server_id'])} on {escape(s['host'])} ({state}); stop it with: "
            f"{escape(s['stop_command'])}",
            highlight=False,
            soft_wrap=True,
        )
