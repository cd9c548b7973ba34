"""`sleuth schema NAME`: the JSON Schema of a command's `--json` output."""

from __future__ import annotations

from typing import Annotated

import typer

from sleuth.cli.common import EXIT_USAGE, console, fail, print_json
from sleuth.outputs import OUTPUTS, schema


def show_schema(
    name: Annotated[
        str | None,
        typer.Argument(help="A command with --json output: ask, tool, verify..."),
    ] = None,
) -> None:
    """Print the JSON Schema of a command's --json output; without NAME, list the names.

    Example: sleuth schema verify > verify.schema.json
    """
    if name is None:
        for known in sorted(OUTPUTS):
            console.print(known, highlight=False)
        return
    try:
        print_json(schema(name))
    except KeyError as exc:
        fail(str(exc.args[0]), EXIT_USAGE)
