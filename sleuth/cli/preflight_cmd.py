"""`sleuth preflight ENGINE MODEL_PATH`: would this launch fail? Checked without launching,
with launch_server's own options; the call is recorded as a transcript."""

from __future__ import annotations

from typing import Any

import typer

from sleuth.cli.common import EXIT_ERROR, EXIT_USAGE, HostName, console, escape, fail, print_json
from sleuth.cli.host_context import person_call
from sleuth.cli.shared_options import SharedOptions, shared_options
from sleuth.config import LOCAL
from sleuth.errors import ErrorKind
from sleuth.outputs import PreflightOutput
from sleuth.tools.approval import approver_for


@shared_options("accept_new_host_key", "transcripts", "no_sign", "as_json", "config")
def preflight(
    engine: str = typer.Argument(..., help="vllm or sglang."),
    model_path: str = typer.Argument(..., help="The model folder on the host."),
    extra_args: list[str] = typer.Argument(
        None, help="Engine arguments after --, as launch_server's extra_args."
    ),
    host: HostName = LOCAL,
    port: int = typer.Option(30000, "--port", help="The port the server would listen on."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel size."),
    quantization: str | None = typer.Option(None, "--quantization", help="Engine's method."),
    python: str | None = typer.Option(None, "--python", help="The engine environment's python."),
    env: list[str] = typer.Option([], "--env", help="NAME=VALUE for the server, repeatable."),
    *,
    opts: SharedOptions,
) -> None:
    """Check, without launching, whether launch_server with these options would fail: the
    engine and its entry point, the port, GPUs against dtype and quantisation, the driver,
    tensor parallel against heads, every shard, the context, /dev/shm and disk. Exits 0 when
    nothing blocks the launch, 1 when a check says it would fail.

    Example: sleuth preflight vllm /models/Llama-3.1-8B --host gpu1 --tp 2 -- --max-model-len 32768
    """
    inputs: dict[str, Any] = {
        "host": host,
        "engine": engine,
        "model_path": model_path,
        "port": port,
        "extra_args": extra_args or [],
        "env": dict(_pair(p) for p in env),
    }
    inputs.update({k: v for k, v in (("tp", tp), ("quantization", quantization),
                                      ("python", python)) if v is not None})  # fmt: skip
    settings = opts.settings()
    # Signed and entered in the ledger as `sleuth tool`'s one-call transcript is.
    seal = opts.seal(settings, quiet=True)
    # The person typed `--python`: their consent to run it, as `sleuth tool ... --yes` is.
    ctx = opts.open_hosts(settings, [host], approver_for("person"))
    result, transcript = person_call(ctx, "preflight", inputs, opts.transcripts, seal)
    if opts.as_json:
        print_json(PreflightOutput(**result.model_dump(), transcript=str(transcript)))
    elif result.ok:
        console.print(escape(result.output), highlight=False, soft_wrap=True)
        console.print(f"[dim]Transcript: {escape(str(transcript))}[/]", soft_wrap=True)
    else:
        console.print(f"[bold red]preflight failed:[/] {escape(result.error or '')}")
    if not result.ok:
        raise typer.Exit(EXIT_USAGE if result.error_kind is ErrorKind.INVALID_INPUT else EXIT_ERROR)
    if result.data["blocked"]:
        raise typer.Exit(EXIT_ERROR)


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        fail(f"--env {text!r} is not NAME=VALUE", EXIT_USAGE)
    return name, value
