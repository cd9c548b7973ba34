"""What every command shares: the console, settings loading, exit codes, JSON output."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.prompt import Confirm
from rich.rule import Rule
from rich.text import Text

from sleuth.config import ConfigError, Settings, load_settings
from sleuth.tools.approval import ApprovalRequest, Approver, approver_for

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_BUDGET = 0, 1, 2, 3
EXIT_REFUSED = EXIT_BUDGET
"""Budget exhausted and refused share exit 3: the run stopped short by design, not by fault."""

PIPED_WIDTH = 10_000
"""The width of output that is not a terminal: wide enough that rich never wraps or cuts a
command, a path or a table row that a program or a person will copy."""


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPED_WIDTH)


console = _console(stderr=False)
err_console = _console(stderr=True)

# The options more than one command takes, declared once: `config: ConfigPath = None`.
_CONFIG_HELP = "Settings file (default: ./sleuth.toml, else ~/.config/sleuth/hosts.toml)."
_JSON_HELP = "Print one JSON object for programs."
ConfigPath = Annotated[Path | None, typer.Option("--config", help=_CONFIG_HELP)]
JsonFlag = Annotated[bool, typer.Option("--json", help=_JSON_HELP)]
AcceptNewHostKey = Annotated[
    bool,
    typer.Option("--accept-new-host-key", help="Trust and store an unknown SSH host key."),
]
HostName = Annotated[str, typer.Option("--host", "-H", help="Host to act on (from sleuth.toml).")]
HostNames = Annotated[
    list[str] | None,
    typer.Option("--host", "-H", help="Host to act on (from sleuth.toml); repeat for several."),
]
DEFAULT_TRANSCRIPTS = Path("transcripts")
TranscriptsDir = Annotated[
    Path, typer.Option("--transcripts", help="Folder the transcript is written to.")
]
ApproveFlag = Annotated[
    bool,
    typer.Option(
        "--yes",
        help="Approve the host-changing calls each host's `allow` permits, without asking; "
        "a custom launch command still needs a matching `approve.commands` rule.",
    ),
]
TranscriptFile = Annotated[
    Path,
    typer.Argument(
        help="A transcript file (.jsonl), e.g. transcripts/20261129T093012Z-ab12.jsonl."
    ),
]

# Still used by bench_cmd, which moves to ConfigPath and JsonFlag when it is split.
ConfigOption = typer.Option(None, "--config", help=_CONFIG_HELP)
JsonOption = typer.Option(False, "--json", help=_JSON_HELP)


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


Pause = Callable[[], AbstractContextManager[object]]


class Prompter:
    """Asks the person at the terminal about one call at a time, with the live view paused.

    Tool calls run in parallel threads; each blocks here on its own request, so an answer
    always belongs to the call shown above it, never to a neighbour's.
    """

    def __init__(self, pause: Pause = nullcontext) -> None:
        self._lock = threading.Lock()
        self._pause = pause

    def __call__(self, request: ApprovalRequest) -> bool:
        with self._lock, self._pause():
            err_console.print(describe_request(request))
            try:
                return Confirm.ask("Allow this call?", console=err_console, default=False)
            except EOFError:  # the terminal closed: no answer is not a yes
                return False


def describe_request(request: ApprovalRequest) -> Text:
    """Host, tool, the full command line and the environment names, shown exactly: JSON with
    every non-ASCII or control character escaped, so a model's argument cannot restyle or
    hide part of it. Environment values are not shown (the input carries them hidden)."""
    text = Text.assemble(
        ("approval needed: ", "bold yellow"),
        (request.tool, "bold"),
        " on host ",
        (request.host, "bold"),
    )
    if request.argv is not None:
        text.append("\n  runs: ")
        text.append(json.dumps(request.argv))
    if request.env:
        text.append("\n  sets environment (values not shown): ")
        text.append(json.dumps(request.env))
    unset: tuple[object, ...] = (None, [], {}, "")
    shown = {k: v for k, v in request.input.items() if k != "host" and v not in unset}
    text.append("\n  input: ")
    text.append(json.dumps(shown, sort_keys=True))
    return text


def approver(yes: bool, interactive: bool, pause: Pause = nullcontext) -> Approver:
    """The host's rules first; then --yes (never for a custom command no rule matches), a
    prompt when there is a terminal, else a refusal that says what would approve it."""
    if yes:
        return approver_for("yes")
    if interactive:
        return approver_for("ask", Prompter(pause))
    return approver_for("refuse")


def heading(title: str) -> RenderableType:
    """A section title: a rule across a terminal; in a pipe, a plain line that is never cut."""
    if console.is_terminal:
        return Rule(Text(title, style="bold"))
    return Text(f"== {title} ==", style="bold")


def plural(n: int, noun: str) -> str:
    """`1 turn`, `2 turns`: every count Sleuth prints goes through here."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def invocation() -> str:
    """How to run this same Sleuth from any folder, for commands we suggest: `sleuth` when
    that is what PATH finds, else its absolute path (an unactivated virtualenv)."""
    script = Path(sys.argv[0])
    if script.name == "__main__.py":
        return shlex.join([sys.executable, "-m", "sleuth.cli"])
    found = shutil.which("sleuth")
    if found and Path(found).resolve() == script.resolve():
        return "sleuth"
    return shlex.quote(str(script.resolve()))
