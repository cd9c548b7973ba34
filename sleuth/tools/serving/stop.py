"""stop_server: end a server Sleuth started, and say what it took."""

from __future__ import annotations

import shlex

from pydantic import Field

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.serving.ctl import SERVER_ID_PATTERN, Stopped, ctl
from sleuth.tools.serving.data import StopData
from sleuth.transcripts.results import ToolResult


class StopServerInput(ToolInput):
    server_id: str = Field(pattern=SERVER_ID_PATTERN, description="From launch_server")
    grace_s: float = Field(30.0, ge=0, le=600, description="Seconds between SIGTERM and SIGKILL")


@tool(mutating=True)
def stop_server(ctx: ToolContext, args: StopServerInput) -> ToolResult:
    """Stop a server started by launch_server: SIGTERM to its process group and to every
    other process it started (workers that left the group, orphans seen while it ran),
    SIGKILL after grace_s to whatever is left, then confirm that none remains. Its log and
    record stay on the host."""
    host = ctx.host(args.host)
    out = stop(host, args.server_id, args.grace_s)
    text = describe_stop(args.server_id, out)
    data = StopData(
        server_id=args.server_id,
        was_running=out.was_running,
        signals=out.signals,
        remaining=out.remaining,
        gone=not out.remaining,
        waited_s=round(out.waited_s, 2),
    ).model_dump(mode="json")
    if out.remaining:
        return ToolResult(ok=False, output=text, data=data, error=text)
    return ToolResult(ok=True, output=text, data=data)


def stop(host: SandboxedHost, server_id: str, grace_s: float) -> Stopped:
    """SIGTERM the server's processes, SIGKILL after `grace_s`, on the host."""
    return ctl(host, "stop", {"id": server_id, "grace_s": grace_s}, Stopped, timeout=grace_s + 30.0)


def stop_quietly(host: SandboxedHost, server_id: str, grace_s: float = 5.0) -> str:
    """Stop a server whose launch went wrong; what happened, as a sentence, never an error."""
    try:
        out = stop(host, server_id, grace_s)
    except Exception as exc:
        return (
            f"could not stop its processes ({exc}); stop it with stop_server server_id={server_id}"
        )
    return describe_stop(server_id, out)


def stop_command(host: str, server_id: str) -> str:
    """The command a person runs to stop a server Sleuth started."""
    return shlex.join(
        ["sleuth", "tool", "stop_server", f"server_id={server_id}", "--host", host, "--yes"]
    )


def describe_stop(server_id: str, out: Stopped) -> str:
    pgid = out.record.pgid
    if not out.was_running:
        return f"server {server_id} (process group {pgid}) was no longer running; nothing to stop"
    sent = " then ".join(out.signals)
    which = f"process group {pgid} and its {len(out.was_running)} process(es)"
    if out.remaining:
        return (
            f"server {server_id}: sent {sent} to {which}, but processes {out.remaining} are "
            f"still there"
        )
    return f"server {server_id}: sent {sent} to {which}; all are gone after {out.waited_s:.1f} s"
