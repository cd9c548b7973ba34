"""What every command shares: the console, settings loading, exit codes, JSON output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from sleuth.config import ConfigError, Settings, load_settings

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_BUDGET = 0, 1, 2, 3

console = Console()
err_console = Console(stderr=True)

ConfigOption = typer.Option(
    None,
    "--config",
    help="Settings file (default: ./sleuth.toml, else ~/.config/sleuth/hosts.toml).",
)
JsonOption = typer.Option(False, "--json", help="Print one JSON object for programs.")


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def settings_or_exit(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)


def print_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
