"""The options many commands take, declared once, and the first steps the commands take with
them: load the settings, start the telemetry export, pick the seal, open the hosts.

`@shared_options(...)` appends the options it names, in that order, after the command's own in
its typer signature (so they stay last in --help) and hands the command their values as one
`SharedOptions`, in the parameter annotated with it:

```python
@shared_options("accept_new_host_key", "as_json", "config")
def servers(host: HostName = LOCAL, *, opts: SharedOptions) -> None:
    settings = opts.settings()
    ctx = opts.open_hosts(settings, [host])
```
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_type_hints

import typer

from sleuth.agent.protocols import Quiet
from sleuth.agent.view import LiveView
from sleuth.cli.common import EXIT_USAGE, Tracing, err_console, fail, settings_or_exit, telemetry
from sleuth.cli.host_context import open_context
from sleuth.cli.sealing import seal_for
from sleuth.config import Settings
from sleuth.hosts.groups import Selection
from sleuth.tools.approval import Approver, deny_all
from sleuth.tools.context import ToolContext
from sleuth.transcripts.allowed_signers import AllowedSignersError
from sleuth.transcripts.seal import Seal
from sleuth.transcripts.verify import Anchors, anchors

ConfigPath = Annotated[
    Path | None,
    typer.Option(
        "--config", help="Settings file (default: ./sleuth.toml, else ~/.config/sleuth/hosts.toml)."
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object for programs.")]
AcceptNewHostKey = Annotated[
    bool,
    typer.Option("--accept-new-host-key", help="Trust and store an unknown SSH host key."),
]
DEFAULT_TRANSCRIPTS = Path("transcripts")
TranscriptsDir = Annotated[
    Path, typer.Option("--transcripts", help="Folder the transcript is written to.")
]
NoSign = Annotated[
    bool,
    typer.Option(
        "--no-sign",
        help="Do not sign the transcript (by default it is signed with ssh-agent's key or "
        "[sign] key in sleuth.toml, when there is one).",
    ),
]
OtlpEndpoint = Annotated[
    str | None,
    typer.Option(
        "--otlp-endpoint",
        metavar="URL",
        help="Send the run's OpenTelemetry spans and metrics (GenAI conventions) to this "
        "OTLP/HTTP collector, e.g. http://127.0.0.1:4318. OTEL_EXPORTER_OTLP_ENDPOINT and "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT do the same. Needs the otel extra.",
    ),
]
OtelContent = Annotated[
    bool,
    typer.Option(
        "--otel-content",
        envvar="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        help="Export content too: the question, the model's output, tool arguments and "
        "output, redacted as the transcript is. Off by default.",
    ),
]

OptionName = Literal[
    "accept_new_host_key",
    "transcripts",
    "no_sign",
    "otlp_endpoint",
    "otel_content",
    "as_json",
    "config",
]
EVERY_OPTION: tuple[OptionName, ...] = get_args(OptionName)
"""For the commands that take them all (ask, tool, bench), in the order --help lists them."""


@dataclass(frozen=True)
class SharedOptions:
    """The shared options' values; one a command does not take keeps its default here."""

    accept_new_host_key: AcceptNewHostKey = False
    transcripts: TranscriptsDir = DEFAULT_TRANSCRIPTS
    no_sign: NoSign = False
    otlp_endpoint: OtlpEndpoint = None
    otel_content: OtelContent = False
    as_json: JsonFlag = False
    config: ConfigPath = None

    def settings(self) -> Settings:
        """--config's settings; exit 2 naming the fault when they do not load."""
        return settings_or_exit(self.config)

    def anchors(self, settings: Settings) -> Anchors:
        """What every reader checks a transcript against, as `sleuth verify` does: the
        configured allowed signers and the ledger; exit 2 when the signers file is bad."""
        try:
            return anchors(settings.sign.allowed_signers, settings.ledger.path)
        except AllowedSignersError as exc:
            fail(str(exc), EXIT_USAGE)

    def tracing(self, send_each_session: bool = False) -> Tracing:
        """The live telemetry export --otlp-endpoint and --otel-content ask for (`telemetry`)."""
        return telemetry(self.otlp_endpoint, self.otel_content, send_each_session)

    def seal(self, settings: Settings, *, quiet: bool = False) -> Seal:
        """The run's seal (`seal_for`, --no-sign); unless `quiet` or --json, says on stderr
        which key signs, or that none does."""
        return seal_for(settings, self.no_sign, quiet=quiet or self.as_json)

    def view(self) -> Quiet | LiveView:
        """The run's progress on stderr, or none under --json."""
        return Quiet() if self.as_json else LiveView(err_console)

    def open_hosts(
        self, settings: Settings, names: Iterable[str], approver: Approver = deny_all
    ) -> ToolContext:
        """The named hosts (`open_context`), trusting a new host key only with the flag."""
        return open_context(
            settings, names, approver=approver, accept_new_host_key=self.accept_new_host_key
        )

    def open_chosen(self, chosen: Selection, approver: Approver = deny_all) -> ToolContext:
        """The hosts and groups --host and --hosts chose (`select_or_exit`)."""
        return open_context(
            chosen.settings,
            chosen.names,
            approver=approver,
            accept_new_host_key=self.accept_new_host_key,
            groups=chosen.groups,
        )


Command = Callable[..., None]


def shared_options(*names: OptionName) -> Callable[[Command], Command]:
    """Append the named options to the command's typer signature and pass their values as the
    command's `SharedOptions` parameter. Typer reads a command's parameters from
    `inspect.signature` (which takes `__signature__` as given) and its types from
    `__annotations__`, so both are set on the wrapper, with the annotations resolved."""
    declared = get_type_hints(SharedOptions, include_extras=True)
    defaults = {field.name: field.default for field in fields(SharedOptions)}
    added = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name], annotation=declared[name]
        )
        for name in names
    ]

    def decorate(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True)
        slot = next(p.name for p in own.parameters.values() if p.annotation is SharedOptions)
        kept = [p for p in own.parameters.values() if p.name != slot]

        @functools.wraps(command)
        def with_options(**values: Any) -> None:
            given = {name: values.pop(name) for name in names}
            command(**values, **{slot: SharedOptions(**given)})

        signature = own.replace(parameters=[*kept, *added])
        with_options.__signature__ = signature  # type: ignore[attr-defined]
        with_options.__annotations__ = {
            **{p.name: p.annotation for p in signature.parameters.values()},
            "return": own.return_annotation,
        }
        return with_options

    return decorate
