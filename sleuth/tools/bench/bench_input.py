"""run_benchmark's input (what a model or `sleuth bench` asks for) and the load generator's
command line built from it."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sleuth.tools.bench.models import Slo
from sleuth.tools.registry import ToolInput

# A ramp's rates are rates: at 0 req/s the next arrival is never due, and the run would wait
# out its whole timeout.
RampRate = Annotated[float, Field(gt=0, le=100_000)]

MAX_WORDS_IN_FLIGHT = 64_000_000
"""About 400 MB of prompts held by the load generator at once."""
LOOPBACK = ("127.0.0.1", "localhost")


def load_python(load: dict[str, Any]) -> str | None:
    """The `python` of run_benchmark inputs another tool runs itself (`load`): the model's
    choice of program, decided as run_benchmark's own `python` is."""
    python = load.get("python")
    return None if python is None else str(python)


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
        64,
        ge=1,
        le=100_000,
        description="Requests per phase (the cap, with duration_s); a trace or shared_prefix "
        "run sends its own count.",
    )
    input_len: int = Field(
        256,
        ge=1,
        le=1 << 20,
        description="Prompt length: tokens with a tokenizer, else words (about one token each).",
    )
    output_len: int = Field(256, ge=1, le=1 << 20, description="max_tokens per request.")
    dataset: Literal[
        "random", "sharegpt", "jsonl", "prefix", "multiturn", "trace", "shared_prefix"
    ] = Field(
        "random",
        description="random prompts; a sharegpt JSON or jsonl file of prompts (dataset_path); "
        "prefix: groups sharing a system prefix; multiturn: conversations that grow each turn; "
        "trace: a Mooncake JSONL or CSV trace (dataset_path) replayed at its own times (or "
        "with concurrency/request_rate); shared_prefix: prefix_groups system prompts of "
        "prefix_len tokens x `questions` questions of input_len tokens.",
    )
    dataset_path: str | None = Field(
        None, description="sharegpt/jsonl/trace: the file on the host, inside its roots."
    )
    speed: float = Field(
        1.0, gt=0, le=10_000, description="trace: replay this many times faster (2 = 2x)."
    )
    max_requests: int | None = Field(
        None, ge=1, le=1_000_000, description="trace: replay at most this many requests."
    )
    block_size: int = Field(
        512, ge=1, le=1 << 16, description="trace: tokens per hash id (Mooncake: 512)."
    )
    questions: int = Field(
        8, ge=1, le=10_000, description="shared_prefix: questions per system prompt."
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
    ramp_up: tuple[RampRate, RampRate] | None = Field(
        None, description="Open loop: the rate moves linearly from [0] to [1] req/s (> 0)."
    )
    duration_s: float | None = Field(
        None,
        gt=0,
        le=86_400,
        description="Stop sending after this many seconds per phase (for a trace: of its "
        "scaled schedule).",
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
    slo_ttft_ms: float | None = Field(None, gt=0, description="Goodput SLO on time to first token.")
    slo_tpot_ms: float | None = Field(
        None, gt=0, description="Goodput SLO on time per output token."
    )
    slo_e2e_ms: float | None = Field(None, gt=0, description="Goodput SLO on end-to-end latency.")
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
        if self.concurrency is not None and self.request_rate is not None:
            raise ValueError("give exactly one of concurrency (a list) and request_rate, not both")
        if self.concurrency is None and self.request_rate is None and not self.replay:
            raise ValueError(
                "give exactly one of concurrency (a list) and request_rate (only a trace "
                "replays at its own times without either)"
            )
        if self.dataset in ("sharegpt", "jsonl", "trace") and not self.dataset_path:
            raise ValueError(f"dataset {self.dataset!r} needs dataset_path, a file on the host")
        if self.concurrency is not None and (
            not self.concurrency or min(self.concurrency) < 1 or max(self.concurrency) > 10_000
        ):
            raise ValueError("concurrency must be a non-empty list of integers from 1 to 10000")
        if self.dataset in ("trace", "shared_prefix"):
            return self  # built one request at a time, just before it is sent
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
    def replay(self) -> bool:
        """A trace sent at its own (scaled) times."""
        return self.dataset == "trace" and self.concurrency is None and self.request_rate is None

    @property
    def port(self) -> int:
        port = urlsplit(self.endpoint).port
        assert port is not None
        return port

    def slo(self) -> Slo:
        return Slo(ttft_ms=self.slo_ttft_ms, tpot_ms=self.slo_tpot_ms, e2e_ms=self.slo_e2e_ms)


def loadgen_args(
    args: RunBenchmarkInput,
    url: str,
    out: str | None,
    roots: list[str] | None = None,
    trace_rows: int | None = None,
    traceparent: str | None = None,
) -> list[str]:
    """The load generator's argv; `trace_rows` is how many trace rows it gets on stdin, and
    `traceparent` the W3C trace context its requests carry (telemetry on)."""
    argv = [
        "--url",
        url,
        "--api",
        args.api,
        "--model",
        args.model,
        "--num-prompts",
        str(args.num_prompts if trace_rows is None else trace_rows),
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
    elif args.request_rate is not None:
        argv += ["--request-rate", str(args.request_rate)]
    if args.max_concurrency:
        argv += ["--max-concurrency", str(args.max_concurrency)]
    if args.spec_counters:
        argv.append("--spec-counters")
    dataset = "trace" if trace_rows is not None else args.dataset
    argv += ["--dataset", dataset, "--temperature", f"{args.temperature:g}"]
    if trace_rows is not None:
        argv += ["--block-size", str(args.block_size)]
    elif args.dataset_path:
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
    if traceparent:
        argv += ["--traceparent", traceparent]
    return argv
