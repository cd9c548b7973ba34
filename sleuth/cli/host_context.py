"""The hosts a command acts on, opened as a ToolContext (exit 2 when sleuth.toml names them
wrongly), and one call run there as the person's own: through the call pipeline, recorded as a
one-call transcript and sealed.

```python
ctx = open_context(settings, [host], accept_new_host_key=accept_new_host_key)
result, transcript = person_call(ctx, "read_lines", inputs, transcripts, seal)
```
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sleuth.agent.session import run_cli_call
from sleuth.cli.common import EXIT_USAGE, NO_TRACING, Tracing, err_console, fail
from sleuth.cli.sealing import say_warnings
from sleuth.config import ConfigError, Settings
from sleuth.hosts.groups import HostGroup
from sleuth.tools.approval import Approver, deny_all
from sleuth.tools.context import ToolContext, build_context
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.seal import Seal
from sleuth.transcripts.store import TranscriptError


def open_context(
    settings: Settings,
    names: Iterable[str],
    *,
    accept_new_host_key: bool,
    approver: Approver = deny_all,
    groups: Mapping[str, HostGroup] | None = None,
) -> ToolContext:
    """`local` and the named hosts (connected when first used); exit 2 naming the fix when the
    settings cannot describe one of them."""
    try:
        return build_context(
            settings,
            names,
            approver=approver,
            accept_new_host_key=accept_new_host_key,
            groups=groups,
        )
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)


def person_call(
    ctx: ToolContext,
    name: str,
    inputs: dict[str, Any],
    transcripts: Path,
    seal: Seal,
    tracing: Tracing = NO_TRACING,
) -> tuple[ToolResult, Path]:
    """Run one call the person typed, as a model's call: the terminal gets what a model would
    get (secrets redacted) and the transcript what it would record; a host's rules still
    apply. Closes the hosts, then says what could not be signed."""
    try:
        with (
            err_console.status(f"{name} on {inputs['host']}", spinner="dots"),
            tracing as ctx.tracing,
        ):
            result, transcript = run_cli_call(transcripts, ctx, name, inputs, seal=seal)
    except TranscriptError as exc:
        fail(str(exc))
    finally:
        ctx.close()
    say_warnings(seal.warnings)
    return result, transcript
