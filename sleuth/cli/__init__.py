"""The `sleuth` command: thin wiring from arguments to the rooms that do the work.

A command's module is imported only when that command runs (or help lists it), so
`sleuth --version` and `sleuth tool ...` do not pay for the MCP SDK, the model SDKs or the
benchmark client.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

COMMANDS = {
    "demo": "sleuth.cli.demo_cmd:demo",
    "ask": "sleuth.cli.ask_cmd:ask",
    "tool": "sleuth.cli.tools_cmd:run_tool",
    "tools": "sleuth.cli.tools_cmd:list_tools",
    "hosts": "sleuth.cli.tools_cmd:show_hosts",
    "servers": "sleuth.cli.servers_cmd:servers",
    "diagnose": "sleuth.cli.diagnose_cmd:diagnose_file",
    "preflight": "sleuth.cli.preflight_cmd:preflight",
    "show": "sleuth.cli.transcripts_cmd:show",
    "verify": "sleuth.cli.transcripts_cmd:verify_cmd",
    "replay": "sleuth.cli.replay_cmd:replay_cmd",
    "resume": "sleuth.cli.replay_cmd:resume_cmd",
    "mcp": "sleuth.cli.mcp_cmd:mcp",
    "schema": "sleuth.cli.schema_cmd:show_schema",
    "bench": "sleuth.cli.bench_cmd:bench_app",
    "export": "sleuth.cli.export_cmd:export_app",
}
"""Each command, in the order help lists them, and its function (or, for a command with
subcommands, its Typer) as `module:name`."""


class _LazyCommands(TyperGroup):
    """Builds a command from its module when it is asked for by name. (Typer vendors click
    and keeps its types private, hence `Any` for the context and the command.)"""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        module, _, name = COMMANDS[cmd_name].partition(":")
        target = getattr(importlib.import_module(module), name)
        commands = typer.Typer(add_completion=False)
        if isinstance(target, typer.Typer):
            commands.add_typer(target, name=cmd_name)
        else:
            commands.command(cmd_name)(target)
        return _reflowed(typer.main.get_group(commands).get_command(ctx, cmd_name))


def _reflowed(command: Any) -> Any:
    """The command (and its subcommands) with its help as paragraphs: rich keeps each line
    break of the source, which a terminal narrower than the source then breaks again, leaving
    one or two words on a line of their own. Lists and indented lines keep their breaks."""
    if command is not None and command.help:
        command.help = "\n\n".join(
            paragraph if _laid_out(paragraph) else _joined(paragraph)
            for paragraph in command.help.strip().split("\n\n")
        )
    for sub in getattr(command, "commands", {}).values():
        _reflowed(sub)
    return command


def _laid_out(paragraph: str) -> bool:
    return any(line.startswith((" ", "-", "*", "|")) for line in paragraph.splitlines()[1:])


def _joined(paragraph: str) -> str:
    """One line per sentence run; an example starts a line of its own."""
    lines: list[str] = []
    for line in paragraph.splitlines():
        if lines and not line.startswith("Example"):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    return "\n".join(lines)


app = typer.Typer(
    cls=_LazyCommands,
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
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print Sleuth's version and exit.",
        ),
    ] = False,
) -> None:
    """Options before any command (the help text is the app's)."""


def main() -> None:
    app()
