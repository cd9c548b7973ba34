"""The `sleuth` command: thin wiring from arguments to the rooms that do the work."""

from __future__ import annotations

from importlib import metadata

import typer

from sleuth.cli import (
    ask_cmd,
    bench_cmd,
    demo_cmd,
    diagnose_cmd,
    mcp_cmd,
    preflight_cmd,
    schema_cmd,
    servers_cmd,
    tools_cmd,
    transcripts_cmd,
)

app = typer.Typer(
    help="Investigate LLM deployments: a model (or the offline playbook) drives sandboxed, "
    "audited tools on your hosts and answers with findings that quote their evidence.\n\n"
    "Example: sleuth demo",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"sleuth {metadata.version('sleuth')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print Sleuth's version and exit.",
    ),
) -> None:
    """Options before any command (the help text is the app's)."""


for _module in (
    demo_cmd,
    ask_cmd,
    tools_cmd,
    servers_cmd,
    diagnose_cmd,
    preflight_cmd,
    transcripts_cmd,
    bench_cmd,
    mcp_cmd,
    schema_cmd,
):
    _module.register(app)


def main() -> None:
    app()
