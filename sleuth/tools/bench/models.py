"""The benchmark's data: a request as the load generator recorded it, and the report that
`metrics` computes from a run (what run_benchmark returns, inside `BenchRun`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)


def pct_key(q: float) -> str:
    return f"p{q:g}"


class RequestRecord(BaseModel):
    """One request as the load generator saw it (times in seconds)."""

    index: int
    phase: int
    warmup: bool = False
    requested_output: int
    input_words: int = 0
    input_tokens_client: int | None = None
    """The prompt's length by the client's tokenizer, when it had one."""
    conv: int | None = None
    turn: int = 0
    t_sched: float
    t_dispatch: float | None = None
    t_send: float
    t_first: float | None = None
    t_first_content: float | None = None
    t_last_token: float | None = None
    t_done: float
    chunk_t: list[float] = Field(default_factory=list)
    chunk_n: list[int] = Field(default_factory=list)
    tokens_estimated: bool = False
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200 and self.t_first is not None

    @property
    def stream_tokens(self) -> int:
        return sum(self.chunk_n)

    @property
    def output_tokens(self) -> int:
        """The server's own count when it gave one, else what the stream showed."""
        reported = (self.usage or {}).get("completion_tokens")
        return reported if isinstance(reported, int) else self.stream_tokens


class Dist(BaseModel):
    """A distribution in milliseconds (or the unit its name says)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    pcts: dict[str, float] = Field(default_factory=dict)
    """The percentiles asked for (`--percentiles`), keyed "p50", "p99.9", ..."""

    def at(self, q: float) -> float | None:
        return self.pcts.get(pct_key(q))


class Slo(BaseModel):
    """Thresholds a request must meet to count towards goodput; None means no limit."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


class ClientLimits(BaseModel):
    """When the client itself, not the server, is the bottleneck."""

    cpu_share: float = 0.9
    """Client CPU seconds per wall second; the loop is one thread, so ~1.0 is saturated."""
    dispatch_lag_p99_ms: float = 10.0
    """Open loop: how late a request left after its scheduled send time."""
    loop_lag_p99_ms: float = 20.0
    """How late the load generator's 5 ms ticker woke: a busy event loop delays every send."""


class TokenMismatch(BaseModel):
    index: int
    """The request's index in the phase."""
    usage: int
    """Output tokens by the server's usage (completion_tokens)."""
    stream: int
    """Output tokens counted from the streamed chunks."""
    estimated: bool
    """The stream's count was estimated from chunk text: no per-chunk usage came."""


class SpecAcceptance(BaseModel):
    """Speculative decoding acceptance over this phase only, from counter deltas."""

    source: str
    accept_length: float | None = None
    accept_rate: float | None = None
    note: str = ""


class ServerDeltas(BaseModel):
    """What the server's own /metrics say happened during this phase (after - before)."""

    source: str
    prefix_cache_queries: float | None = None
    """Tokens looked up in vLLM's prefix cache (vllm:prefix_cache_queries)."""
    prefix_cache_hits: float | None = None
    prefix_cache_hit_rate: float | None = None
    """hits / queries; SGLang: its own sglang:cache_hit_rate gauge, read after the phase."""
    queue_time_mean_ms: float | None = None
    """Mean time a request waited in the server's queue (queue_time_seconds sum / count)."""
    preemptions: float | None = None
    """vLLM: requests preempted for want of KV cache (vllm:num_preemptions)."""
    retractions: float | None = None
    """SGLang: requests retracted for want of KV cache (sglang:num_retracted_reqs)."""


class ClientHealth(BaseModel):
    cpu_share: float
    """Client CPU seconds per wall second over the phase."""
    loop_lag: Dist
    dispatch_lag: Dist | None = None
    client_limited: bool
    reasons: list[str] = Field(default_factory=list)


class PhaseMetrics(BaseModel):
    phase: int
    mode: Literal["closed", "open"]
    concurrency_target: int | None = None
    request_rate: float | None = None
    requests: int
    completed: int
    failed: int
    errors: dict[str, int] = Field(default_factory=dict)
    duration_s: float
    ttft: Dist
    ttft_from_sched: Dist
    ttft_content: Dist
    e2e: Dist
    tpot: Dist
    itl_chunk: Dist
    itl_token: Dist
    prompt_tokens: Dist = Field(default_factory=Dist)
    """Prompt tokens per request as the server counted them (usage), else the client's."""
    prompt_tokens_source: Literal["server", "client tokenizer", "words"] = "words"
    request_throughput: float
    output_throughput: float
    total_throughput: float
    concurrency: float
    """Time-averaged requests in flight (send to done) over the phase."""
    goodput: float | None = None
    """Requests/s that succeeded and met every SLO; None without SLOs."""
    goodput_share: float | None = None
    output_len_mismatch_share: float
    token_mismatches: list[TokenMismatch] = Field(default_factory=list)
    tokens_estimated: bool
    client: ClientHealth
    spec: SpecAcceptance | None = None
    server: ServerDeltas | None = None


class BenchReport(BaseModel):
    header: dict[str, Any]
    phases: list[PhaseMetrics]
    slo: Slo
    percentiles: list[float] = Field(default_factory=lambda: list(DEFAULT_PERCENTILES))

    @property
    def client_limited(self) -> bool:
        return any(p.client.client_limited for p in self.phases)


class BenchRun(BaseModel):
    """What run_benchmark returns as data."""

    host: str
    where: Literal["remote", "local"]
    jsonl: str
    """The raw per-request records, saved on this machine."""
    round_trip_ms: Dist | None = None
    """where=local through a port forward: HTTP round trips of a tiny request."""
    report: BenchReport
