"""The `sleuth` command: thin wiring from arguments to the rooms that do the work."""

from __future__ import annotations

import typer

from sleuth.cli import ask_cmd, bench_cmd, demo_cmd, servers_cmd, tools_cmd, transcripts_cmd

app = typer.Typer(
    help="Investigate LLM deployments: a model (or the offline playbook) drives sandboxed, "
    "audited tools on your hosts and answers with findings that quote their evidence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in (demo_cmd, ask_cmd, tools_cmd, servers_cmd, transcripts_cmd, bench_cmd):
    _module.register(app)


def main() -> None:
    app()
