"""run_benchmark: load an OpenAI-compatible streaming server and measure it honestly.

The load generator (`sleuth/hosts/program/loadgen.py`) runs on the serving host by
default, against 127.0.0.1, with that host's Python; its raw per-request JSON lines
come back and are kept under ./bench-results/, and the metrics are computed here
(`sleuth.tools.bench.metrics`). `where="local"` runs it on this machine instead,
through an SSH port forward when the host is remote, and records the round trip.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from sleuth.errors import ErrorKind
from sleuth.hosts.host import LocalHost, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import SECRET_RUNNER, program, with_secrets
from sleuth.tools.bench.bench_input import RunBenchmarkInput, loadgen_args
from sleuth.tools.bench.metrics import summarise
from sleuth.tools.bench.models import BenchReport, BenchRun, Dist
from sleuth.tools.bench.port_forward import reach
from sleuth.tools.bench.render import render_text
from sleuth.tools.bench.traces import (
    MAX_TRACE_BYTES,
    read_trace,
    replay_rows,
    shared_prefix_trace,
)
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import tool
from sleuth.tools.results import ToolError
from sleuth.transcripts.redact import clean_cut, redact, redact_data, register_secret
from sleuth.transcripts.results import ToolResult


@tool(mutating=True)
def run_benchmark(ctx: ToolContext, args: RunBenchmarkInput) -> ToolResult:
    """Benchmark an OpenAI-compatible streaming server (SGLang, vLLM, ...) on a host.

    Sends seeded requests in a closed loop (a list of concurrencies, run as a sweep) or
    an open loop (request_rate, gamma burstiness, optional ramp_up), from a dataset
    (random, sharegpt/jsonl files, shared-prefix groups, multi-turn conversations), or
    replays a trace (Mooncake JSONL or CSV: arrival times, lengths and shared prefix
    blocks) at its own times, `speed` times faster; with ignore_eos and a fixed
    max_tokens by default. Lengths are exact tokens when a tokenizer is given, else
    words. Reports per phase TTFT (from send and from the scheduled time), TPOT, ITL per
    chunk and per token, E2E (n/mean/percentiles, in ms), prompt tokens as the server
    counted them, throughput, achieved concurrency, goodput for the SLOs given, failures,
    and the server's /metrics deltas (prefix-cache hits, queue time, preemptions,
    speculative acceptance) for this run only. It flags a run whose client was the
    bottleneck. The load generator runs on the host itself against 127.0.0.1 (give
    `python` for the engine's venv when the host python lacks aiohttp).
    """
    return benchmark(ctx, args)


def benchmark(
    ctx: ToolContext, args: RunBenchmarkInput, headers: dict[str, str] | None = None
) -> ToolResult:
    """run_benchmark with request headers (an API key) that travel on stdin, never in argv,
    and never in the tool's input, so no transcript or model sees them."""
    host = ctx.host(args.host)
    started = time.monotonic()
    args, headers = _credentials_off_url(args, headers or {})
    args = _resolved(host, args)
    trace = _trace(host, args)
    # Both travel on stdin: headers are secret, and a trace's rows can run to megabytes.
    secrets = {**({"headers": headers} if headers else {}), **({"trace": trace} if trace else {})}
    rows = len(trace["rows"]) if trace else None
    if args.where == "remote":
        raw, argv = _run_remote(host, args, secrets or None, rows, ctx.traceparent)
        rtt = None
    else:
        raw, argv, rtt = _run_local(host, args, secrets or None, rows, ctx.traceparent)
    raw = _redacted(raw)
    path = _save(raw, ctx.results_dir, args.host)
    report = _summary(raw, args)
    run = BenchRun(
        host=args.host, where=args.where, jsonl=str(path), round_trip_ms=rtt, report=report
    )
    return ToolResult(
        ok=True,
        output=render_text(run),
        data=run.model_dump(mode="json"),
        argv=[argv],
        duration_s=time.monotonic() - started,
    )


def _summary(raw: bytes, args: RunBenchmarkInput) -> BenchReport:
    """The run's metrics; records of another shape (a load generator of another version, a
    host python that prints more) are a ToolError naming the host and the program."""
    try:
        return summarise(raw.splitlines(), args.slo(), percentiles=args.percentiles)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # ValidationError too
        raise ToolError(
            f"loadgen.py on host {args.host!r} wrote records Sleuth cannot read "
            f"({type(exc).__name__}: {clean_cut(str(exc)[:200])}); its interpreter may not "
            f"be a plain Python: pass python= the engine's virtualenv python",
            ErrorKind.HOST,
        ) from None


def _credentials_off_url(
    args: RunBenchmarkInput, headers: dict[str, str]
) -> tuple[RunBenchmarkInput, dict[str, str]]:
    """`http://user:pass@127.0.0.1:PORT` as the endpoint without its credentials and an
    Authorization header (unless one is given): the header travels on stdin, so the password
    is on no command line, in no record and in no URL a server error quotes back."""
    parts = urlsplit(args.endpoint)
    if parts.username is None and parts.password is None:
        return args, headers
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    for value in (password, token):
        register_secret(value)
    netloc = f"{parts.hostname}:{parts.port}"
    bare = args.model_copy(update={"endpoint": urlunsplit(parts._replace(netloc=netloc))})
    return bare, {"Authorization": f"Basic {token}", **headers}


def _redacted(raw: bytes) -> bytes:
    """The load generator's records as they may be kept and shown: each one redacted as data
    (a server's error may quote a key or header back), before anything reads or saves them."""
    out = []
    for line in raw.decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(redact(line))
            continue
        out.append(json.dumps(_redacted_record(record), separators=(",", ":")))
    return ("\n".join(out) + "\n").encode()


def _redacted_record(record: Any) -> Any:
    """`redact_data` of a record, less its lists of numbers (chunk times: most of its size,
    and no text), which are kept as they are."""
    if not isinstance(record, dict):
        return redact_data(record)
    numbers = {
        k: v
        for k, v in record.items()
        if isinstance(v, list) and all(isinstance(x, int | float) for x in v)
    }
    rest = redact_data({k: v for k, v in record.items() if k not in numbers})
    return {**rest, **numbers} if isinstance(rest, dict) else rest


def _resolved(host: SandboxedHost, args: RunBenchmarkInput) -> RunBenchmarkInput:
    """Files the load generator reads on the host must lie inside its roots."""
    update: dict[str, Any] = {}
    if args.dataset_path:
        update["dataset_path"] = host.resolve(args.dataset_path)
    if args.tokenizer and args.tokenizer != "auto":
        update["tokenizer"] = host.resolve(args.tokenizer)
    return args.model_copy(update=update) if update else args


def _trace(host: SandboxedHost, args: RunBenchmarkInput) -> dict[str, Any] | None:
    """A trace's rows for the load generator (from the file on the host, or generated for
    shared_prefix), retimed by `speed` and cut to the caps; None for other datasets."""
    if args.dataset == "shared_prefix":
        requests = shared_prefix_trace(
            systems=args.prefix_groups,
            questions=args.questions,
            system_len=args.prefix_len,
            question_len=args.input_len,
            output_len=args.output_len,
            block_size=args.block_size,
            seed=args.seed,
        )
        source, kind = f"shared_prefix {args.prefix_groups}x{args.questions}", "generated"
    elif args.dataset == "trace" and args.dataset_path:
        data = read_whole(host.host, args.dataset_path, size=MAX_TRACE_BYTES + 1, timeout=300)
        trace = read_trace(data, args.dataset_path)
        requests, source, kind = trace.requests, trace.source, trace.format
    else:
        return None
    rows = replay_rows(
        requests, speed=args.speed, max_requests=args.max_requests, max_duration_s=args.duration_s
    )
    if not rows:
        raise ToolError(f"no request of {source} falls inside duration_s={args.duration_s:g}")
    return {
        "rows": rows,
        "source": source,
        "format": kind,
        "requests_in_source": len(requests),
        "speed": args.speed,
    }


def _run_remote(
    host: SandboxedHost,
    args: RunBenchmarkInput,
    secrets: dict[str, Any] | None,
    rows: int | None,
    traceparent: str | None,
) -> tuple[bytes, list[str]]:
    roots = host.real_roots if args.tokenizer else None
    result = host.run_program(
        "loadgen.py",
        loadgen_args(args, args.endpoint, None, roots, rows, traceparent),
        # On this machine the load generator runs with Sleuth's own interpreter, which
        # has aiohttp; the system python3 may not.
        python=args.python or (sys.executable if isinstance(host.host, LocalHost) else None),
        timeout=args.timeout_s,
        max_bytes=64_000,
        retry=False,  # a dropped connection must not send the load twice
        secrets=secrets,
    )
    argv = result.argv
    _check(result.exit_code, result.timed_out, result.stderr, host.name, argv[0], args)
    out = _out_path(result.stdout)
    try:
        raw = read_whole(host.host, out)  # our own file under /tmp, outside the roots
    finally:
        host.run(["rm", "-f", "--", out], timeout=30)
    return raw, argv


def _run_local(
    host: SandboxedHost,
    args: RunBenchmarkInput,
    secrets: dict[str, Any] | None,
    rows: int | None,
    traceparent: str | None,
) -> tuple[bytes, list[str], Dist | None]:
    local = LocalHost("local")
    roots = host.real_roots if args.tokenizer else None
    with (
        tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp,
        reach(host, args.endpoint, args.port) as (url, rtt),
    ):
        out = str(Path(tmp) / "run.jsonl")
        head = ["-c", SECRET_RUNNER] if secrets else ["-"]
        argv = [sys.executable, *head, *loadgen_args(args, url, out, roots, rows, traceparent)]
        stdin = with_secrets("loadgen.py", secrets) if secrets else program("loadgen.py")
        result = local.run(argv, stdin=stdin, timeout=args.timeout_s, max_bytes=64_000)
        _check(result.exit_code, result.timed_out, result.stderr, "local", argv[0], args)
        return Path(out).read_bytes(), argv, rtt


def _check(
    code: int | None,
    timed_out: bool,
    stderr: bytes,
    where: str,
    python: str,
    args: RunBenchmarkInput,
) -> None:
    if timed_out:
        raise ToolError(
            f"the benchmark ran past timeout_s={args.timeout_s:g}; give fewer "
            "num_prompts or a larger timeout_s"
        )
    if code == 0:
        return
    err = stderr.decode(errors="replace").strip()
    if "No module named 'aiohttp'" in err:
        raise ToolError(
            f"{python} on host {where!r} has no aiohttp; pass python= the engine's "
            "virtualenv python (SGLang and vLLM both install aiohttp)"
        )
    tail = "\n".join(err.splitlines()[-8:]) or "(no output)"
    raise ToolError(f"the load generator failed on host {where!r} (exit {code}):\n{tail}")


def _out_path(stdout: bytes) -> str:
    lines = stdout.decode(errors="replace").strip().splitlines()
    try:
        out = json.loads(lines[-1])["out"]
    except (IndexError, ValueError, KeyError, TypeError):
        raise ToolError(
            "the load generator did not say where it wrote its records; "
            f"its output was: {stdout[-300:]!r}"
        ) from None
    if not isinstance(out, str) or not out.startswith("/tmp/sleuth-bench-"):
        raise ToolError(f"unexpected load generator output path {out!r}")
    return out


def _save(raw: bytes, folder: Path, host: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = folder / f"bench-{stamp}-{host}.jsonl"
    # Only its owner reads a run's records (they hold the server's answers).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path.resolve()
