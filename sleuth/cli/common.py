"""What every command shares: the console, settings loading, exit codes, JSON output."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeAlias

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.markup import escape as escape_markup
from rich.prompt import Confirm
from rich.rule import Rule
from rich.text import Text

from sleuth.config import ConfigError, Settings, load_settings
from sleuth.hosts.groups import Selection, select_hosts
from sleuth.tools.approval import ApprovalRequest, Approver, approver_for
from sleuth.transcripts.controls import printable_json, shown, shown_json

if TYPE_CHECKING:
    from sleuth.telemetry.live import LiveExport

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

# The options and arguments more than one command takes, declared once (the ones most take,
# and their first steps, are in shared_options): `host: HostName = LOCAL`.
HostName = Annotated[str, typer.Option("--host", "-H", help="Host to act on (from sleuth.toml).")]
HostNames = Annotated[
    list[str] | None,
    typer.Option("--host", "-H", help="Host to act on (from sleuth.toml); repeat for several."),
]
HostSpecs = Annotated[
    list[str] | None,
    typer.Option(
        "--hosts",
        help="Hosts by the group: a group named in sleuth.toml, a pattern over its hosts and "
        "the aliases of ~/.ssh/config (gpu-d*), or a comma list; repeat for several. A "
        "read-only tool then runs on a whole group at once (host=@GROUP).",
    ),
]
FleetConcurrency = Annotated[
    int | None,
    typer.Option(
        "--fleet-concurrency",
        min=1,
        help="Hosts a call on a group reaches at once (default 32, or [fleet] concurrency).",
    ),
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


def escape(text: str) -> str:
    """Text from a host, a model or a file, for console markup: shown as it is written, its
    markup escaped and every character that could act on a terminal written as an escape
    (`transcripts.controls`), on a terminal and in a pipe alike, since a file a pipe wrote is
    later shown on a terminal. Every command shows such text through here or `say`."""
    return escape_markup(shown(text))


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


Tracing: TypeAlias = "AbstractContextManager[LiveExport | None]"
"""A command's live telemetry export, as a context whose value goes on `ctx.tracing`."""
NO_TRACING: Tracing = nullcontext(None)


def telemetry(endpoint: str | None, content: bool, send_each_session: bool = False) -> Tracing:
    """The command's live telemetry export: a context to run the command in, whose value goes
    on the ToolContext (`ctx.tracing`), and that sends what is left when the command is done;
    None inside when no export is asked for (no --otlp-endpoint, no OTEL_EXPORTER_OTLP_*).
    `send_each_session`: a server sends each session's spans as it ends (a signal may stop
    it before the block is left)."""
    from sleuth.telemetry.settings import SettingsError, destination

    try:
        where = destination(endpoint, content, os.environ)
    except SettingsError as exc:
        fail(str(exc), EXIT_USAGE)
    if where is None:
        return nullcontext(None)
    require_otel()
    from sleuth.telemetry.live import LiveExport
    from sleuth.tools.registry import all_tools

    tools = frozenset(all_tools())
    return LiveExport(where, warn, send_each_session=send_each_session, tools=tools)


OTEL_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "google.protobuf")


def require_otel() -> None:
    """Exit 2, saying how to install it, when the `otel` extra is missing."""
    from sleuth.telemetry import INSTALL_HINT

    for name in OTEL_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            fail(
                f"exporting telemetry needs the OpenTelemetry SDK and OTLP exporter ({name} is "
                f"not installed); install them with: {INSTALL_HINT}",
                EXIT_USAGE,
            )


def say(text: str) -> None:
    """A line for the person, on stderr and as written (no markup): stdout keeps the output."""
    err_console.print(shown(text), markup=False, highlight=False)


def warn(text: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False, soft_wrap=True)


def settings_or_exit(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)


def select_or_exit(
    settings: Settings,
    names: list[str] | None,
    specs: list[str] | None,
    concurrency: int | None = None,
) -> Selection:
    """The run's hosts and groups from --host and --hosts; a usage error that names the fix for
    an unknown name or a group or pattern that matches nothing."""
    if concurrency is not None:
        settings.fleet.concurrency = concurrency
    try:
        return select_hosts(settings, names or [], specs or [])
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)


def print_json(value: BaseModel | dict[str, Any] | list[Any]) -> None:
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    sys.stdout.write(printable_json(data, indent=2) + "\n")


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
    """Host, tool, the full command line and the environment, shown exactly: JSON with every
    non-ASCII or control character escaped, so a model's argument cannot restyle or hide part
    of it. Environment values are shown (a path into a model folder is what a person judges),
    except those under a secret name."""
    text = Text.assemble(
        ("approval needed: ", "bold yellow"),
        (shown(request.tool), "bold"),
        " on host ",
        (shown(request.host), "bold"),
    )
    if request.argv is not None:
        text.append("\n  runs: ")
        text.append(shown_json(request.argv))
    if request.env:
        text.append("\n  sets environment (secret values hidden): ")
        text.append(shown_json(request.env_shown, sort_keys=True))
    unset: tuple[object, ...] = (None, [], {}, "")
    given = {k: v for k, v in request.input.items() if k != "host" and v not in unset}
    text.append("\n  input: ")
    text.append(shown_json(given, sort_keys=True))
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
