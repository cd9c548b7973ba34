"""`sleuth tool`, `sleuth tools`, `sleuth hosts`: the tools and hosts without a model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from sleuth.cli.common import (
    EXIT_ERROR,
    EXIT_REFUSED,
    EXIT_USAGE,
    FleetConcurrency,
    HostName,
    HostSpecs,
    console,
    err_console,
    escape,
    fail,
    plural,
    print_json,
    select_or_exit,
)
from sleuth.cli.host_context import person_call
from sleuth.cli.shared_options import EVERY_OPTION, SharedOptions, shared_options
from sleuth.config import LOCAL, ConfigError, Settings
from sleuth.errors import ErrorKind, HostError, ToolError
from sleuth.outputs import ToolOutput
from sleuth.tools.approval import approver_for
from sleuth.tools.context import build_context
from sleuth.tools.registry import all_tools, get_tool, plugin_errors, validation_text
from sleuth.transcripts.fleet import is_fleet_host
from sleuth.transcripts.results import ToolResult


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


@shared_options(*EVERY_OPTION)
def run_tool(
    name: Annotated[str, typer.Argument(help="Tool name; see `sleuth tools`.")],
    assignments: Annotated[
        list[str] | None, typer.Argument(help="Inputs as key=value, e.g. path=x start=5")
    ] = None,
    host: HostName = LOCAL,
    fleet: HostSpecs = None,
    fleet_concurrency: FleetConcurrency = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            help="You approve this one call to a tool that changes the host (the host's "
            "`allow` list still applies).",
        ),
    ] = False,
    *,
    opts: SharedOptions,
) -> None:
    """Run one tool and print its result, exactly as a model would see it; the call is recorded
    as a transcript like any investigation's.

    Example: sleuth tool read_lines path=README.md start=1 end=20

    Example: sleuth tool python_env --hosts decode   (every host of the group, grouped)
    """
    settings = opts.settings()
    export = opts.tracing()
    if is_fleet_host(host):
        fleet, host = [*(fleet or []), host[1:]], LOCAL
    chosen = select_or_exit(settings, [host], fleet, fleet_concurrency)
    if fleet:
        # One fleet call over the group named, or over every host --hosts chose.
        host = "@" + chosen.target(fleet[0] if len(fleet) == 1 else "")
    inputs = {"host": host, **parse_assignments(assignments or [])}
    try:
        get_tool(name).input_model.model_validate(inputs)
    except ToolError as exc:
        fail(str(exc), EXIT_USAGE)
    except ValidationError as exc:
        fail(validation_text(name, exc), EXIT_USAGE)
    seal = opts.seal(settings, quiet=True)
    # The person typing the command consents to this one call; a host's rules still apply.
    ctx = opts.open_chosen(chosen, approver_for("person" if yes else "refuse"))
    result, transcript = person_call(ctx, name, inputs, opts.transcripts, seal, export)
    if opts.as_json:
        print_json(ToolOutput(**result.model_dump(), transcript=str(transcript)))
    else:
        _print_result(name, host, result, transcript)
    if not result.ok:
        raise typer.Exit(EXIT_REFUSED if result.refused else EXIT_ERROR)


def _print_result(name: str, host: str, result: ToolResult, transcript: Path) -> None:
    if result.ok:
        console.print(escape(result.output), highlight=False, soft_wrap=True)
        console.print(
            f"[dim]{name} on {host}: {result.duration_s * 1000:.0f} ms"
            f"{', ' + plural(result.bytes_cut, 'byte') + ' cut' if result.bytes_cut else ''}"
            f". Transcript: {escape(str(transcript))}[/]"
        )
        return
    console.print(f"[bold red]{name} failed:[/] {escape(result.error or '')}", soft_wrap=True)
    if result.traceback:  # a bug in Sleuth: show where, for the report
        err_console.print(escape(result.traceback), highlight=False, soft_wrap=True)
    console.print(f"[dim]Transcript: {escape(str(transcript))}[/]", soft_wrap=True)


@shared_options("as_json")
def list_tools(*, opts: SharedOptions) -> None:
    """List the tools a model may call, with their input schemas.

    Example: sleuth tools --json
    """
    tools = sorted(all_tools().values(), key=lambda t: (t.mutating, t.name))
    for plugin, error in plugin_errors().items():
        err_console.print(
            f"[yellow]warning:[/] {escape(f'tool plugin {plugin!r} did not load: {error}')}",
            highlight=False,
            soft_wrap=True,
        )
    if opts.as_json:
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


@shared_options("accept_new_host_key", "as_json", "config", "transcripts", "no_sign")
def show_hosts(
    check: Annotated[
        bool, typer.Option("--check", help="Connect and report latency and roots.")
    ] = False,
    discover: Annotated[
        str | None,
        typer.Option(
            "--discover",
            metavar="HOST",
            help="List the containers on HOST (list_containers, recorded), mark the inference "
            "engines and print the sleuth.toml lines that make each a host.",
        ),
    ] = None,
    runtime: Annotated[
        str | None,
        typer.Option(
            "--runtime",
            help="With --discover: docker, podman, nerdctl (default: the first "
            "that answers) or kubectl (with --namespace).",
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="With --runtime kubectl: the namespace.")
    ] = None,
    selector: Annotated[
        str | None, typer.Option("--selector", help="With kubectl: a label selector.")
    ] = None,
    *,
    opts: SharedOptions,
) -> None:
    """Show the configured hosts; with --check, connect to each one; with --discover HOST,
    list the containers HOST runs.

    Example: sleuth hosts --check
    Example: sleuth hosts --discover gpu1
    """
    if discover is not None:
        asked = {"runtime": runtime, "namespace": namespace, "selector": selector}
        _discover({"host": discover, **{k: v for k, v in asked.items() if v}}, opts)
        return
    settings = opts.settings()
    rows: list[dict[str, Any]] = []
    for name, host_cfg in settings.hosts.items():
        row: dict[str, Any] = {
            "name": name,
            "ssh": host_cfg.ssh
            or (f"via {host_cfg.via}: {host_cfg.pod or host_cfg.container}" if host_cfg.via else "")
            or "(this machine)",
            "roots": host_cfg.roots,
            "allow": host_cfg.allow,
        }
        if check:
            row.update(_check_host(settings, name, opts.accept_new_host_key))
        rows.append(row)
    if opts.as_json:
        print_json(rows)
    else:
        _print_hosts(rows, check, settings.source)
    if check and any(not r.get("ok") for r in rows):
        raise typer.Exit(EXIT_ERROR)


def _discover(inputs: dict[str, Any], opts: SharedOptions) -> None:
    """list_containers on a host as a person's call: recorded like `sleuth tool`."""
    from sleuth.cli.host_context import person_call

    settings = opts.settings()
    seal = opts.seal(settings, quiet=True)
    ctx = opts.open_hosts(settings, [inputs["host"]])
    result, transcript = person_call(ctx, "list_containers", inputs, opts.transcripts, seal)
    if opts.as_json:
        print_json(result.model_dump(mode="json"))
    elif result.ok:
        console.print(escape(result.output), highlight=False, soft_wrap=True)
        console.print(f"[dim]Transcript: {escape(str(transcript))}[/]", soft_wrap=True)
    else:
        console.print(f"[bold red]discovery failed:[/] {escape(result.error or '')}")
    if not result.ok:
        usage = result.error_kind is ErrorKind.INVALID_INPUT
        raise typer.Exit(EXIT_USAGE if usage else EXIT_ERROR)


def _check_host(settings: Settings, name: str, accept_new_host_key: bool) -> dict[str, Any]:
    """Connect, time a command, stat the roots and describe the host; failures become a row."""
    try:
        ctx = build_context(settings, [name], accept_new_host_key=accept_new_host_key)
    except ConfigError as exc:
        return {"ok": False, "error": str(exc), "error_kind": ErrorKind.CONFIG}
    try:
        sandbox = ctx.hosts[name]
        start = time.monotonic()
        run = sandbox.run(["true"], timeout=15)
        latency_ms = (time.monotonic() - start) * 1000
        roots = {root: sandbox.host.stat(root).kind for root in sandbox.config.roots}
        facts = sandbox.host.describe()
    except HostError as exc:
        return {"ok": False, "error": str(exc), "error_kind": exc.kind}
    finally:
        ctx.close()
    return {
        "ok": run.exit_code == 0,
        "latency_ms": round(latency_ms, 1),
        "roots_found": roots,
        **facts.model_dump(mode="json"),
    }


def _print_hosts(rows: list[dict[str, Any]], check: bool, source: str | None) -> None:
    table = Table(title=f"hosts ({source or 'built-in defaults: no sleuth.toml found'})")
    # Paths and fingerprints are long single words: fold them onto the next line, never cut
    # them, so what is shown can be copied.
    for col in ("host", "ssh", "roots", "allows", *(["check"] if check else [])):
        table.add_column(col, overflow="fold")
    for r in rows:
        cells = [
            escape(c)
            for c in (r["name"], r["ssh"], "\n".join(r["roots"]), ", ".join(r["allow"]) or "-")
        ]
        if check:
            cells.append(_check_cell(r))
        table.add_row(*cells)
    console.print(table)


def _check_cell(r: dict[str, Any]) -> str:
    if not r.get("ok"):
        return f"[red]{escape(r.get('error', 'failed'))}[/]"
    who = "@".join(p for p in (r.get("user"), r.get("address")) if p) or "this machine"
    lines = [f"[green]ok[/] {r['latency_ms']} ms {escape(who)}"]
    if r.get("call_mode"):
        lines.append(escape(f"file tools: {r['call_mode']}"))
    if r.get("host_key_fingerprint"):
        lines.append(escape(f"{r['host_key_type']} {r['host_key_fingerprint']}"))
    found = r.get("roots_found", {})
    lines += [escape(f"{k} {'ok' if v == 'dir' else v}") for k, v in found.items()]
    lines += [f"[yellow]warning: {escape(w)}[/]" for w in r.get("warnings", [])]
    return "\n".join(lines)
