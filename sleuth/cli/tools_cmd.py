"""`sleuth tool`, `sleuth tools`, `sleuth hosts`: the tools and hosts without a model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from sleuth.agent.session import record_cli_call
from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    ConfigOption,
    JsonOption,
    console,
    err_console,
    fail,
    print_json,
    settings_or_exit,
)
from sleuth.config import ConfigError
from sleuth.outputs import ToolOutput
from sleuth.tools.connect import build_context
from sleuth.tools.hosts import HostError
from sleuth.tools.policy import ApprovalDecision, ApprovalRequest, Approver, deny_all
from sleuth.tools.registry import all_tools, execute
from sleuth.transcripts.redact import redact_obj
from sleuth.transcripts.store import TranscriptError


def register(app: typer.Typer) -> None:
    app.command("tool")(run_tool)
    app.command("tools")(list_tools)
    app.command("hosts")(show_hosts)


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """key=value pairs; a value that is a JSON list or object is parsed, the rest stay text."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"argument {pair!r} is not key=value (e.g. path=config.json)", EXIT_USAGE)
        if value.startswith(("[", "{")):
            try:
                values[key] = json.loads(value)
                continue
            except json.JSONDecodeError as exc:
                fail(f"{key}: {value!r} looks like JSON but is not valid: {exc}", EXIT_USAGE)
        values[key] = value
    return values


def approve_with_yes(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="--yes")


def run_tool(
    name: str = typer.Argument(..., help="Tool name; see `sleuth tools`."),
    assignments: list[str] = typer.Argument(None, help="Inputs as key=value, e.g. path=x start=5"),
    host: str = typer.Option("local", "--host", "-H", help="Host to run on (from sleuth.toml)."),
    yes: bool = typer.Option(False, "--yes", help="Approve a tool that changes the host."),
    accept_new_host_key: bool = typer.Option(
        False, "--accept-new-host-key", help="Trust and store an unknown SSH host key."
    ),
    transcripts: Path = typer.Option(
        Path("transcripts"), "--transcripts", help="Folder the call's transcript is written to."
    ),
    as_json: bool = JsonOption,
    config: Path | None = ConfigOption,
) -> None:
    """Run one tool and print its result, exactly as a model would see it; the call is recorded
    as a transcript like any investigation's.

    Example: sleuth tool read_lines path=README.md start=1 end=20
    """
    settings = settings_or_exit(config)
    inputs = {"host": host, **parse_assignments(assignments or [])}
    approver: Approver = approve_with_yes if yes else deny_all
    try:
        ctx = build_context(
            settings, [host], approver=approver, accept_new_host_key=accept_new_host_key
        )
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    try:
        with err_console.status(f"{name} on {host}", spinner="dots"):
            result = execute(ctx, name, inputs)
        # The terminal gets what a model would get: secrets redacted.
        result = redact_obj(result)
        try:
            transcript = record_cli_call(transcripts, ctx, name, inputs, result)
        except TranscriptError as exc:
            fail(str(exc))
    finally:
        ctx.close()
    if as_json:
        print_json(ToolOutput(**result.model_dump(), transcript=str(transcript)))
    elif result.ok:
        console.print(escape(result.output), highlight=False, soft_wrap=True)
        console.print(
            f"[dim]{name} on {host}: {result.duration_s * 1000:.0f} ms"
            f"{', ' + str(result.bytes_cut) + ' bytes cut' if result.bytes_cut else ''}"
            f". Transcript: {escape(str(transcript))}[/]"
        )
    else:
        console.print(f"[bold red]{name} failed:[/] {escape(result.error or '')}")
        console.print(f"[dim]Transcript: {escape(str(transcript))}[/]")
    if not result.ok:
        raise typer.Exit(EXIT_ERROR)


def list_tools(as_json: bool = JsonOption) -> None:
    """List the tools a model may call, with their input schemas."""
    tools = sorted(all_tools().values(), key=lambda t: (t.mutating, t.name))
    if as_json:
        print_json(
            [
                {
                    "name": t.name,
                    "mutating": t.mutating,
                    "description": t.description,
                    "input_schema": t.input_schema(),
                }
                for t in tools
            ]
        )
        return
    table = Table(title="Sleuth tools", show_lines=True)
    table.add_column("tool", style="bold")
    table.add_column("changes host")
    table.add_column("inputs")
    table.add_column("what it does")
    for t in tools:
        props = t.input_schema().get("properties", {})
        inputs = "\n".join(
            f"{k}: {v.get('type', v.get('anyOf', [{}])[0].get('type', '?'))}"
            for k, v in props.items()
        )
        table.add_row(
            t.name, "yes" if t.mutating else "no", inputs, (t.description.split("\n\n")[0])
        )
    console.print(table)


def show_hosts(
    check: bool = typer.Option(False, "--check", help="Connect and report latency and roots."),
    accept_new_host_key: bool = typer.Option(False, "--accept-new-host-key"),
    as_json: bool = JsonOption,
    config: Path | None = ConfigOption,
) -> None:
    """Show the configured hosts; with --check, connect to each one."""
    settings = settings_or_exit(config)
    rows: list[dict[str, Any]] = []
    for name, host_cfg in settings.hosts.items():
        row: dict[str, Any] = {
            "name": name,
            "ssh": host_cfg.ssh or "(this machine)",
            "roots": host_cfg.roots,
            "allow": host_cfg.allow,
        }
        if check:
            row.update(_check_host(settings, name))
        rows.append(row)
    if as_json:
        print_json(rows)
    else:
        _print_hosts(rows, check, settings.source)
    if check and any(not r.get("ok") for r in rows):
        raise typer.Exit(EXIT_ERROR)


def _check_host(settings: Any, name: str) -> dict[str, Any]:
    try:
        ctx = build_context(settings, [name], accept_new_host_key=False)
        sandbox = ctx.hosts[name]
        start = time.monotonic()
        run = sandbox.run(["true"], timeout=15)
        latency_ms = (time.monotonic() - start) * 1000
        roots = {root: sandbox.host.stat(root).kind for root in sandbox.config.roots}
        describe = getattr(sandbox.host, "describe", None)
        extra = describe() if callable(describe) else {}
        ctx.close()
    except (HostError, ConfigError, OSError) as exc:
        return {"ok": False, "error": str(exc)}
    return {
        "ok": run.exit_code == 0,
        "latency_ms": round(latency_ms, 1),
        "roots_found": roots,
        **extra,
    }


def _print_hosts(rows: list[dict[str, Any]], check: bool, source: str | None) -> None:
    table = Table(title=f"hosts ({source or 'built-in defaults: no sleuth.toml found'})")
    for col in ("host", "ssh", "roots", "allows"):
        table.add_column(col)
    if check:
        table.add_column("check")
    for r in rows:
        cells = [r["name"], r["ssh"], "\n".join(r["roots"]), ", ".join(r["allow"]) or "-"]
        if check:
            if r.get("ok"):
                found = r.get("roots_found", {})
                roots = ", ".join(f"{k} {'ok' if v == 'dir' else v}" for k, v in found.items())
                who = f"{r.get('user', '')} {r.get('key_type', '')}".strip()
                cells.append(f"[green]ok[/] {r['latency_ms']} ms {who}\n{roots}")
            else:
                cells.append(f"[red]{escape(r.get('error', 'failed'))}[/]")
        table.add_row(*[c if c.startswith("[") else escape(c) for c in cells])
    console.print(table)
