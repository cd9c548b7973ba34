"""What `sleuth bench` and `sleuth bench ab` share: the load's options, declared once, the
parsing of their values (lists, JSON, headers, SLOs, trace speed) into run_benchmark input,
and the audited call that runs a benchmark tool and records its transcript."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic import ValidationError

from sleuth.agent.session import CLI_CALL_ID, new_session_id, run_cli_call
from sleuth.cli.common import EXIT_ERROR, EXIT_USAGE, NO_TRACING, Tracing, err_console, escape, fail
from sleuth.cli.sealing import say_warnings
from sleuth.config import LOCAL
from sleuth.errors import HostError, ToolError
from sleuth.tools.bench.bench_input import RunBenchmarkInput
from sleuth.tools.bench.goodput import parse_slo
from sleuth.tools.bench.plot import pyplot
from sleuth.tools.bench.traces import parse_speed
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput
from sleuth.transcripts.redact import register_secret
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.seal import Seal
from sleuth.transcripts.store import TranscriptError

Number = TypeVar("Number", int, float)

MODEL = typer.Option(..., "--model", "-m", help="Model name for the requests.")
CONCURRENCY = typer.Option(
    None, "--concurrency", "-c", help="Closed loop: e.g. 1,4,16 (a sweep). Or --request-rate."
)
RATE = typer.Option(
    None, "--request-rate", "-r", help="Open loop: requests/s (0 = all at once). Or -c."
)
DURATION = typer.Option(
    None,
    "--duration",
    "--max-duration",
    help="Seconds per phase (of a trace's scaled schedule); then -n is only a cap.",
)
NUM_PROMPTS = typer.Option(None, "--num-prompts", "-n", help="Requests per phase [default: 64].")
INPUT_LEN = typer.Option(
    256, help="Prompt length: tokens with --tokenizer, else words (about one token each)."
)
OUTPUT_LEN = typer.Option(256, help="max_tokens per request.")
DATASET = typer.Option(
    "random",
    help="random, sharegpt, jsonl (with --dataset-path), prefix, multiturn, trace or "
    "shared_prefix.",
)
DATASET_PATH = typer.Option(
    None, help='sharegpt JSON or JSONL ({"prompt": ..., "output_len": N}) on the host.'
)
TRACE = typer.Option(
    None,
    help="Replay a trace on the host: Mooncake JSONL (timestamp ms, input_length, "
    "output_length, hash_ids) or CSV (timestamp,input,output), at its own times unless -c/-r.",
)
SPEED = typer.Option("1x", help="Trace: replay this much faster, e.g. 2x or 0.5x.")
MAX_REQUESTS = typer.Option(None, help="Trace: replay at most this many requests.")
BLOCK_SIZE = typer.Option(512, help="Trace: tokens per hash id (Mooncake: 512).")
SHARED_PREFIX = typer.Option(
    None,
    help="N,M: N system prompts of --prefix-len tokens x M questions of --input-len tokens, "
    "as a trace of shared prefix blocks (needs -c or -r).",
)
PREFIX_LEN = typer.Option(256, help="prefix / shared-prefix: length of each shared prefix.")
TOKENIZER = typer.Option(
    None,
    help="Folder with tokenizer.json on the host, for exact token lengths; 'auto' takes "
    "the served model's folder when it is inside the host's roots.",
)
API_KEY = typer.Option(
    None,
    help="Sent as 'Authorization: Bearer KEY' [default: $OPENAI_API_KEY]; travels on "
    "stdin, never on a command line.",
    show_default=False,
)
HEADER = typer.Option(
    [], "--header", help="Extra request header K:V (repeatable); values stay off argv."
)
EXTRA_BODY = typer.Option(
    None, help="JSON object merged into every request, e.g. '{\"top_k\": 1}'."
)
SEED = typer.Option(0, help="Seeds prompts, lengths and arrival times.")
WARMUP = typer.Option(2, help="Requests sent first (in every run) and left out.")
API = typer.Option("chat", help="chat or completions.")
WHERE = typer.Option("remote", help="remote: on the host; local: here, forwarded.")
PYTHON = typer.Option(None, help="Python on the host with aiohttp.")
SLO = typer.Option(
    None, help="Latency SLOs for goodput, e.g. ttft=500ms,tpot=50ms,e2e=4s (number alone: ms)."
)
OUT_DIR = typer.Option(Path("bench-results"), help="Where the records, tables and plots go.")


def audited(
    ctx: ToolContext,
    tool: str,
    args: ToolInput,
    status: str,
    transcripts: Path,
    call: Callable[[ToolContext], ToolResult],
    seal: Seal,
    tracing: Tracing = NO_TRACING,
) -> tuple[ToolResult, Path]:
    """Run a benchmark tool's call, audited like a model's: the host must permit benchmarks
    (`allow = ["run_benchmark"]`), the calls it makes of other tools (bench ab's relaunches)
    ask consent and are recorded as its parts, and the call is recorded as a one-call
    transcript, sealed (request headers are not inputs, so they are not in it). With telemetry
    on, the session id is chosen first, so the engine's requests carry the span the recorded
    call will have."""
    session_id = new_session_id()
    try:
        if args.host != LOCAL:
            ctx.host(args.host).check_allowed("run_benchmark")
        with tracing as ctx.tracing, err_console.status(status, spinner="dots"):
            if ctx.tracing is not None:
                ctx.traceparent = ctx.tracing.traceparent(session_id, CLI_CALL_ID)
            inputs = args.model_dump(mode="json")
            result, transcript = run_cli_call(
                transcripts, ctx, tool, inputs, call, seal, session_id=session_id
            )
    except (ToolError, HostError, TranscriptError) as exc:
        fail(str(exc), EXIT_ERROR)
    finally:
        ctx.close()
    say_warnings(seal.warnings)
    if not result.ok:
        fail(result.error or result.output, EXIT_ERROR)
    return result, transcript


def load_input(options: Mapping[str, Any], **given: Any) -> RunBenchmarkInput:
    """run_benchmark's input from a command's parsed options (`typer.Context.params`): an option
    named as a field passes as it is, the lists and JSON are parsed, the workload's options are
    combined (`_workload_fields`), and `given` wins. A usage error names each field that is
    wrong."""
    fields = _workload_fields(options)
    fields |= {name: parse(options[name]) for name, parse in PARSED.items() if name in options}
    duration = options["duration"]
    fields |= {
        "duration_s": duration,
        "num_prompts": options["num_prompts"] or (10_000 if duration else 64),
    }
    same = {k: v for k, v in options.items() if k in RunBenchmarkInput.model_fields}
    try:
        return RunBenchmarkInput(**(same | fields | given))
    except ValidationError as exc:
        fail(
            "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors()
            ),
            EXIT_USAGE,
        )


def _workload_fields(options: Mapping[str, Any]) -> dict[str, Any]:
    """--trace, --shared-prefix, --speed and --slo as run_benchmark fields."""
    fields: dict[str, Any] = {
        "dataset": options["dataset"],
        "dataset_path": options["dataset_path"],
        "prefix_groups": options.get("prefix_groups", 4),
    }
    try:
        fields["speed"] = parse_speed(options["speed"])
        if options["slo"]:
            slo = parse_slo(options["slo"]).model_dump()
            fields.update({f"slo_{k}": v for k, v in slo.items()})
    except ToolError as exc:
        fail(str(exc), EXIT_USAGE)
    if options["trace"]:
        fields.update(dataset="trace", dataset_path=options["trace"])
    if options["shared_prefix"]:
        groups, questions = ints(options["shared_prefix"], "--shared-prefix") or [0, 0]
        fields.update(dataset="shared_prefix", prefix_groups=groups, questions=questions)
    return fields


def headers(pairs: list[str], api_key: str | None) -> dict[str, str]:
    """--header K:V pairs and the API key, registered as secrets before anything prints."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            fail(f"--header {pair.split(':')[0]!r}...: give NAME:VALUE", EXIT_USAGE)
        out[name.strip()] = value.strip()
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key:
        out.setdefault("Authorization", f"Bearer {key}")
    for value in out.values():
        register_secret(value)
    return out


def json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"--extra-body is not JSON: {exc}", EXIT_USAGE)
    if not isinstance(value, dict):
        fail("--extra-body must be a JSON object, e.g. '{\"top_k\": 1}'", EXIT_USAGE)
    return value


def floats(text: str | None, flag: str, count: int | None = None) -> Any:
    if text is None:
        return None
    values = _split(text, flag, float, "numbers separated by commas")
    if count is not None and len(values) != count:
        fail(f"{flag} {text!r}: give {count} numbers separated by a comma", EXIT_USAGE)
    return values


def ints(text: str | None, flag: str = "--concurrency") -> list[int] | None:
    if text is None:
        return None
    values = _split(text, flag, int, "integers separated by commas, e.g. 1,4,16")
    if flag == "--shared-prefix" and len(values) != 2:
        fail(f"--shared-prefix {text!r}: give N,M (system prompts, questions each)", EXIT_USAGE)
    return values


def _split(text: str, flag: str, kind: Callable[[str], Number], expected: str) -> list[Number]:
    try:
        return [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"{flag} {text!r}: give {expected}", EXIT_USAGE)


PARSED: dict[str, Callable[[Any], Any]] = {
    "concurrency": ints,
    "ramp_up": lambda text: floats(text, "--ramp-up", 2),
    "extra_body": json_object,
    "percentiles": lambda text: floats(text, "--percentiles"),
}
"""The options whose text `load_input` parses into the field of the same name, in this order,
where the command has them."""


def plot_module(required: bool, what: str = "the plots") -> Any:
    """matplotlib's pyplot, checked before the run so a missing extra costs no benchmark."""
    plt = pyplot()
    if plt is None:
        if required:
            fail(
                "--plot needs matplotlib, which is not installed: pip install 'sleuth[plot]' "
                "(or leave out --plot)",
                EXIT_USAGE,
            )
        # escape: rich would take [plot] for markup and print `sleuth` alone.
        note = f"note: matplotlib is not installed, so {what} are skipped "
        err_console.print(escape(note + "(pip install 'sleuth[plot]')"))
    return plt
