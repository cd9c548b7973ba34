"""run_benchmark: load an OpenAI-compatible streaming server and measure it honestly.

The load generator (`sleuth/hosts/program/loadgen.py`) runs on the serving host by
default, against 127.0.0.1, with that host's Python; its raw per-request JSON lines
come back and are kept under ./bench-results/, and the metrics are computed here
(`sleuth.tools.bench.metrics`). `where="local"` runs it on this machine instead,
through an SSH port forward when the host is remote, and records the round trip.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sleuth.hosts.host import LocalHost, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import SECRET_RUNNER, program, with_secrets
from sleuth.tools.bench.metrics import summarise
from sleuth.tools.bench.models import BenchRun, Dist, Slo
from sleuth.tools.bench.port_forward import reach
from sleuth.tools.bench.render import render_text
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError
from sleuth.transcripts.results import ToolResult

MAX_WORDS_IN_FLIGHT = 64_000_000
"""About 400 MB of prompts held by the load generator at once."""
LOOPBACK = ("127.0.0.1", "localhost")


class RunBenchmarkInput(ToolInput):
    endpoint: str = Field(
        "http://127.0.0.1:30000",
        description="Base URL of the server as seen from the host, on loopback, e.g. "
        "http://127.0.0.1:30000 (the benchmark only loads the host's own server).",
    )
    model: str = Field(description="Model name to put in each request (see /v1/models).")
    api: Literal["chat", "completions"] = Field("chat", description="Which endpoint to load.")
    concurrency: list[int] | None = Field(
        None, description="Closed loop: concurrencies to run one after another (a sweep)."
    )
    request_rate: float | None = Field(
        None,
        ge=0,
        le=100_000,
        description="Open loop: Poisson arrivals per second (0 = all at once).",
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=10_000, description="Open loop: cap on requests in flight."
    )
    num_prompts: int = Field(
        64, ge=1, le=100_000, description="Requests per phase (the cap, with duration_s)."
    )
    input_len: int = Field(
        256,
        ge=1,
        le=1 << 20,
        description="Prompt length: tokens with a tokenizer, else words (about one token each).",
    )
    output_len: int = Field(256, ge=1, le=1 << 20, description="max_tokens per request.")
    dataset: Literal["random", "sharegpt", "jsonl", "prefix", "multiturn"] = Field(
        "random",
        description="random prompts; a sharegpt JSON or jsonl file of prompts (dataset_path); "
        "prefix: groups sharing a system prefix; multiturn: conversations that grow each turn.",
    )
    dataset_path: str | None = Field(
        None, description="sharegpt/jsonl: the file on the host, inside its roots."
    )
    range_ratio: float = Field(
        0.0, ge=0, lt=1, description="random: lengths drawn uniformly in len*(1±ratio)."
    )
    prefix_len: int = Field(256, ge=1, le=1 << 18, description="prefix: shared prefix length.")
    prefix_groups: int = Field(4, ge=1, le=10_000, description="prefix: how many prefixes.")
    turns: int = Field(3, ge=1, le=100, description="multiturn: turns per conversation.")
    tokenizer: str | None = Field(
        None,
        description="Folder on the host with tokenizer.json, so lengths are exact tokens; "
        "'auto': the folder the server reports for the model, when inside the roots.",
    )
    burstiness: float = Field(
        1.0, gt=0, le=100, description="Open loop: gamma shape of arrivals (1 = Poisson)."
    )
    ramp_up: tuple[float, float] | None = Field(
        None, description="Open loop: the rate moves linearly from [0] to [1] req/s."
    )
    duration_s: float | None = Field(
        None, gt=0, le=86_400, description="Stop sending after this many seconds per phase."
    )
    temperature: float = Field(0.0, ge=0, le=2)
    ignore_eos: bool = Field(True, description="Generate exactly output_len tokens.")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Merged into every request body."
    )
    label: str | None = Field(
        None, max_length=200, description="A name for this run, kept in its records' header."
    )
    percentiles: list[float] = Field(
        default_factory=lambda: [50.0, 90.0, 99.0],
        description="Percentiles to report, e.g. [50, 90, 99, 99.9].",
    )
    seed: int = Field(0, description="Seeds prompts and arrivals.")
    warmup: int = Field(
        2, ge=0, le=10_000, description="Requests sent first and left out of the metrics."
    )
    where: Literal["remote", "local"] = Field(
        "remote", description="Run the load generator on the host (default) or here."
    )
    python: str | None = Field(
        None,
        description="Python on the host with aiohttp, e.g. the engine's venv python; "
        "default: the host's configured python.",
    )
    slo_ttft_ms: float | None = Field(None, description="Goodput SLO on time to first token.")
    slo_tpot_ms: float | None = Field(None, description="Goodput SLO on time per output token.")
    slo_e2e_ms: float | None = Field(None, description="Goodput SLO on end-to-end latency.")
    spec_counters: bool = Field(
        True, description="Read the server's speculative counters before and after each phase."
    )
    timeout_s: float = Field(
        1800.0, gt=0, le=86_400, description="Wall-clock limit for the whole run."
    )

    @field_validator("endpoint")
    @classmethod
    def _loopback(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK or parts.port is None:
            raise ValueError(
                f"{value!r} is not a loopback URL with a port; give http://127.0.0.1:PORT "
                "(the server as the host itself sees it)"
            )
        return value.rstrip("/")

    @field_validator("percentiles")
    @classmethod
    def _percentiles(cls, value: list[float]) -> list[float]:
        if not value or any(not 0 < p < 100 for p in value):
            raise ValueError("percentiles are numbers between 0 and 100, e.g. [50, 90, 99.9]")
        return sorted(set(value))

    @model_validator(mode="after")
    def _one_mode(self) -> RunBenchmarkInput:
        if self.ramp_up is not None and self.request_rate is None and self.concurrency is None:
            self.request_rate = self.ramp_up[0]
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency (a list) and request_rate")
        if self.dataset in ("sharegpt", "jsonl") and not self.dataset_path:
            raise ValueError(f"dataset {self.dataset!r} needs dataset_path, a file on the host")
        if self.concurrency is not None and (
            not self.concurrency or min(self.concurrency) < 1 or max(self.concurrency) > 10_000
        ):
            raise ValueError("concurrency must be a non-empty list of integers from 1 to 10000")
        # Prompts are built per request, so memory grows with what is in flight at once.
        in_flight = max(self.concurrency or [self.max_concurrency or self.num_prompts])
        words = self.words_per_request()
        if in_flight * words > MAX_WORDS_IN_FLIGHT:
            raise ValueError(
                f"{in_flight} requests of {words} words in flight would hold "
                f"{in_flight * words:,} prompt words; keep it under "
                f"{MAX_WORDS_IN_FLIGHT:,} (lower input_len, concurrency or max_concurrency)"
            )
        return self

    def words_per_request(self) -> int:
        """The longest prompt one request can carry, in words (or tokens)."""
        words = int(self.input_len * (1 + self.range_ratio)) + 1
        if self.dataset == "prefix":
            words += self.prefix_len
        if self.dataset == "multiturn":
            words = self.turns * words + (self.turns - 1) * self.output_len
        return words

    @property
    def port(self) -> int:
        port = urlsplit(self.endpoint).port
        assert port is not None
        return port

    def slo(self) -> Slo:
        return Slo(ttft_ms=self.slo_ttft_ms, tpot_ms=self.slo_tpot_ms, e2e_ms=self.slo_e2e_ms)


def loadgen_args(
    args: RunBenchmarkInput, url: str, out: str | None, roots: list[str] | None = None
) -> list[str]:
    argv = [
        "--url",
        url,
        "--api",
        args.api,
        "--model",
        args.model,
        "--num-prompts",
        str(args.num_prompts),
        "--input-len",
        str(args.input_len),
        "--output-len",
        str(args.output_len),
        "--seed",
        str(args.seed),
        "--warmup",
        str(args.warmup),
    ]
    if args.concurrency is not None:
        argv += ["--concurrency", ",".join(map(str, args.concurrency))]
    else:
        argv += ["--request-rate", str(args.request_rate)]
    if args.max_concurrency:
        argv += ["--max-concurrency", str(args.max_concurrency)]
    if args.spec_counters:
        argv.append("--spec-counters")
    argv += ["--dataset", args.dataset, "--temperature", f"{args.temperature:g}"]
    if args.dataset_path:
        argv += ["--dataset-path", args.dataset_path]
    if args.range_ratio:
        argv += ["--range-ratio", f"{args.range_ratio:g}"]
    if args.dataset == "prefix":
        argv += ["--prefix-len", str(args.prefix_len), "--prefix-groups", str(args.prefix_groups)]
    if args.dataset == "multiturn":
        argv += ["--turns", str(args.turns)]
    if args.tokenizer:
        argv += ["--tokenizer", args.tokenizer, "--roots", ",".join(roots or [])]
    if args.burstiness != 1.0:
        argv += ["--burstiness", f"{args.burstiness:g}"]
    if args.ramp_up:
        argv += ["--ramp-up", ",".join(f"{r:g}" for r in args.ramp_up)]
    if args.duration_s is not None:
        argv += ["--duration", f"{args.duration_s:g}"]
    if not args.ignore_eos:
        argv.append("--no-ignore-eos")
    if args.label:
        argv += ["--label", args.label]
    if args.extra_body:
        argv += ["--extra-body", json.dumps(args.extra_body, separators=(",", ":"))]
    if out:
        argv += ["--out", out]
    return argv


@tool(mutating=True)
def run_benchmark(ctx: ToolContext, args: RunBenchmarkInput) -> ToolResult:
    """Benchmark an OpenAI-compatible streaming server (SGLang, vLLM, ...) on a host.

    Sends seeded requests in a closed loop (a list of concurrencies, run as a sweep) or
    an open loop (request_rate, gamma burstiness, optional ramp_up), from a dataset
    (random, sharegpt/jsonl files, shared-prefix groups, multi-turn conversations),
    with ignore_eos and a fixed max_tokens by default. Lengths are exact tokens when a
    tokenizer is given, else words. Reports per phase TTFT (from send and from the
    scheduled time), TPOT, ITL per chunk and per token, E2E (n/mean/percentiles, in
    ms), prompt tokens as the server counted them, throughput, achieved concurrency,
    goodput for the SLOs given, failures, and the server's /metrics deltas (prefix-cache
    hits, queue time, preemptions, speculative acceptance) for this run only. It flags a
    run whose client was the bottleneck. The load generator runs on the host itself
    against 127.0.0.1 (give `python` for the engine's venv when the host python lacks
    aiohttp).
    """
    return benchmark(ctx, args)


def benchmark(
    ctx: ToolContext, args: RunBenchmarkInput, headers: dict[str, str] | None = None
) -> ToolResult:
    """run_benchmark with request headers (an API key) that travel on stdin, never in argv,
    and never in the tool's input, so no transcript or model sees them."""
    host = ctx.host(args.host)
    started = time.monotonic()
    args = _resolved(host, args)
    secrets = {"headers": headers} if headers else None
    if args.where == "remote":
        raw, argv = _run_remote(host, args, secrets)
        rtt = None
    else:
        raw, argv, rtt = _run_local(host, args, secrets)
    path = _save(raw, ctx.results_dir, args.host)
    report = summarise(raw.splitlines(), args.slo(), percentiles=args.percentiles)
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


def _resolved(host: SandboxedHost, args: RunBenchmarkInput) -> RunBenchmarkInput:
    """Files the load generator reads on the host must lie inside its roots."""
    update: dict[str, Any] = {}
    if args.dataset_path:
        update["dataset_path"] = host.resolve(args.dataset_path)
    if args.tokenizer and args.tokenizer != "auto":
        update["tokenizer"] = host.resolve(args.tokenizer)
    return args.model_copy(update=update) if update else args


def _run_remote(
    host: SandboxedHost, args: RunBenchmarkInput, secrets: dict[str, Any] | None
) -> tuple[bytes, list[str]]:
    roots = host.real_roots if args.tokenizer else None
    result = host.run_program(
        "loadgen.py",
        loadgen_args(args, args.endpoint, None, roots),
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
    host: SandboxedHost, args: RunBenchmarkInput, secrets: dict[str, Any] | None
) -> tuple[bytes, list[str], Dist | None]:
    local = LocalHost("local")
    roots = host.real_roots if args.tokenizer else None
    with (
        tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp,
        reach(host, args.endpoint, args.port) as (url, rtt),
    ):
        out = str(Path(tmp) / "run.jsonl")
        head = ["-c", SECRET_RUNNER] if secrets else ["-"]
        argv = [sys.executable, *head, *loadgen_args(args, url, out, roots)]
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
    path.write_bytes(raw)
    return path.resolve()
