"""Serving metrics from the load generator's per-request records.

Pure functions over the JSON lines `sleuth/hosts/program/loadgen.py` writes: nothing
here touches the network, so every figure can be recomputed from a saved file.

Definitions (times are the client's, on one monotonic clock):
- TTFT = t_first - t_send, where t_first is the first chunk carrying content,
  reasoning or tool calls; also from t_sched, so that client queueing shows.
- E2E = t_last_token - t_send: a late usage chunk or [DONE] does not count.
- TPOT = (t_last_token - t_first) / (out - 1) for out >= 2.
- ITL per chunk = the gap between token-carrying chunks; per token = gap / the
  later chunk's tokens.
- Throughput is over T = first send to last completion of the phase.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from sleuth.tools.bench.models import (
    DEFAULT_PERCENTILES,
    BenchReport,
    ClientHealth,
    ClientLimits,
    Dist,
    PhaseMetrics,
    RequestRecord,
    ServerDeltas,
    Slo,
    SpecAcceptance,
    TokenMismatch,
    pct_key,
)

MS = 1000.0


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) on sorted data."""
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def dist(
    values: Iterable[float], scale: float = MS, percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> Dist:
    ordered = sorted(v * scale for v in values)
    if not ordered:
        return Dist()
    return Dist(
        pcts={pct_key(q): percentile(ordered, q) for q in percentiles},
        n=len(ordered),
        mean=sum(ordered) / len(ordered),
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p95=percentile(ordered, 95),
        p99=percentile(ordered, 99),
        max=ordered[-1],
    )


def parse_lines(
    lines: Iterable[str | bytes],
) -> tuple[dict[str, Any], list[dict[str, Any]], list[RequestRecord]]:
    """Split a load generator's output into header, phase lines and request records."""
    header: dict[str, Any] = {}
    phases: list[dict[str, Any]] = []
    records: list[RequestRecord] = []
    for line in lines:
        if not line.strip():
            continue
        obj = json.loads(line)
        kind = obj.get("type")
        if kind == "header":
            header = obj
        elif kind == "phase":
            phases.append(obj)
        elif kind == "request":
            records.append(RequestRecord.model_validate(obj))
    return header, phases, records


def summarise(
    lines: Iterable[str | bytes],
    slo: Slo | None = None,
    limits: ClientLimits | None = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> BenchReport:
    """Metrics for every phase of one load generator run."""
    header, phases, records = parse_lines(lines)
    slo, limits = slo or Slo(), limits or ClientLimits()
    out = []
    for phase in phases:
        mine = [r for r in records if r.phase == phase["phase"] and not r.warmup]
        out.append(phase_metrics(phase, mine, slo, limits, percentiles))
    return BenchReport(header=header, phases=out, slo=slo, percentiles=list(percentiles))


def phase_metrics(
    phase: dict[str, Any],
    records: list[RequestRecord],
    slo: Slo,
    limits: ClientLimits,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> PhaseMetrics:
    pq = percentiles
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    start = min((r.t_send for r in records), default=0.0)
    end = max((r.t_done for r in records), default=start)
    span = max(end - start, 1e-9)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(_prompt_tokens(r) for r in ok)
    good = [r for r in ok if meets(r, slo)] if _has_slo(slo) else None
    return PhaseMetrics(
        phase=phase["phase"],
        mode=phase["mode"],
        concurrency_target=phase.get("concurrency"),
        request_rate=phase.get("request_rate"),
        requests=len(records),
        completed=len(ok),
        failed=len(failed),
        errors=_error_counts(failed),
        duration_s=span,
        ttft=dist((r.t_first - r.t_send for r in ok if r.t_first is not None), MS, pq),
        ttft_from_sched=dist((r.t_first - r.t_sched for r in ok if r.t_first is not None), MS, pq),
        ttft_content=dist(
            (r.t_first_content - r.t_send for r in ok if r.t_first_content is not None), MS, pq
        ),
        e2e=dist((_e2e(r) for r in ok), MS, pq),
        tpot=dist((t for r in ok if (t := tpot(r)) is not None), MS, pq),
        itl_chunk=dist((g for r in ok for g, _ in gaps(r)), MS, pq),
        itl_token=dist((g / n for r in ok for g, n in gaps(r)), MS, pq),
        prompt_tokens=dist((_prompt_tokens(r) for r in ok), 1.0, pq),
        prompt_tokens_source=_prompt_source(ok),
        request_throughput=len(ok) / span,
        output_throughput=out_tokens / span,
        total_throughput=(out_tokens + in_tokens) / span,
        concurrency=sum(r.t_done - r.t_send for r in records) / span,
        goodput=None if good is None else len(good) / span,
        goodput_share=None if good is None else len(good) / max(len(records), 1),
        output_len_mismatch_share=(
            sum(r.output_tokens != r.requested_output for r in ok) / len(ok) if ok else 0.0
        ),
        token_mismatches=[
            TokenMismatch(
                index=r.index,
                usage=r.output_tokens,
                stream=r.stream_tokens,
                estimated=r.tokens_estimated,
            )
            for r in ok
            if r.output_tokens != r.stream_tokens
        ],
        tokens_estimated=any(r.tokens_estimated for r in ok),
        client=client_health(phase, limits),
        spec=spec_acceptance(phase.get("counters_before"), phase.get("counters_after")),
        server=server_deltas(phase.get("counters_before"), phase.get("counters_after")),
    )


def _e2e(r: RequestRecord) -> float:
    assert r.t_last_token is not None
    return r.t_last_token - r.t_send


def tpot(r: RequestRecord) -> float | None:
    """Seconds per output token after the first; None below two tokens."""
    out = r.output_tokens
    if out < 2 or r.t_first is None or r.t_last_token is None:
        return None
    return (r.t_last_token - r.t_first) / (out - 1)


def gaps(r: RequestRecord) -> list[tuple[float, float]]:
    """(gap before a chunk, tokens in it) for every chunk after the first.

    Token counts per chunk are rescaled so they sum to the request's authoritative
    count when the server's usage and the stream disagree.
    """
    scale = r.output_tokens / r.stream_tokens if r.stream_tokens else 1.0
    t, n = r.chunk_t, r.chunk_n
    return [(t[i] - t[i - 1], max(n[i] * scale, 1e-9)) for i in range(1, len(t))]


def meets(r: RequestRecord, slo: Slo) -> bool:
    checks = [
        (slo.ttft_ms, (r.t_first or 0.0) - r.t_send),
        (slo.e2e_ms, _e2e(r)),
        (slo.tpot_ms, tpot(r)),
    ]
    return all(limit is None or value is None or value * MS <= limit for limit, value in checks)


def _has_slo(slo: Slo) -> bool:
    return any(v is not None for v in (slo.ttft_ms, slo.tpot_ms, slo.e2e_ms))


def _prompt_source(ok: list[RequestRecord]) -> Literal["server", "client tokenizer", "words"]:
    if ok and all(isinstance((r.usage or {}).get("prompt_tokens"), int) for r in ok):
        return "server"
    if ok and all(r.input_tokens_client is not None for r in ok):
        return "client tokenizer"
    return "words"


def server_deltas(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> ServerDeltas | None:
    """Prefix-cache hits, queue time, preemptions and retractions over the phase."""
    b, a = (before or {}).get("/metrics") or {}, (after or {}).get("/metrics") or {}
    if not b or not a:
        return None

    def d(*keys: str) -> float | None:
        for key in keys:
            if (v := _delta(b, a, key)) is not None:
                return v
        return None

    queries = d("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries")
    hits = d("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits")
    q_sum = d("vllm:request_queue_time_seconds_sum", "sglang:queue_time_seconds_sum")
    q_n = d("vllm:request_queue_time_seconds_count", "sglang:queue_time_seconds_count")
    sglang_rate = a.get("sglang:cache_hit_rate")
    out = ServerDeltas(
        source="/metrics, after minus before this phase",
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        prefix_cache_hit_rate=(hits / queries if hits is not None and queries else sglang_rate),
        queue_time_mean_ms=q_sum / q_n * MS if q_sum is not None and q_n else None,
        preemptions=d("vllm:num_preemptions_total", "vllm:num_preemptions"),
        retractions=d("sglang:num_retracted_reqs_total", "sglang:num_retracted_reqs"),
    )
    fields = out.model_dump(exclude={"source"})
    return out if any(v is not None for v in fields.values()) else None


def _prompt_tokens(r: RequestRecord) -> int:
    reported = (r.usage or {}).get("prompt_tokens")
    if isinstance(reported, int):
        return reported
    return r.input_tokens_client if r.input_tokens_client is not None else r.input_words


def _error_counts(failed: list[RequestRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in failed:
        key = (r.error or "no token received").split(":", 1)[0]
        counts[key] = counts.get(key, 0) + 1
    return counts


def client_health(phase: dict[str, Any], limits: ClientLimits) -> ClientHealth:
    wall = max(float(phase.get("wall_s") or 0.0), 1e-9)
    cpu_share = float(phase.get("cpu_s") or 0.0) / wall
    loop_lag = _lag_dist(phase.get("loop_lag"))
    dispatch = _lag_dist(phase["dispatch_lag"]) if phase.get("dispatch_lag") else None
    reasons = []
    if cpu_share >= limits.cpu_share:
        reasons.append(f"client CPU {cpu_share:.0%} of one core (limit {limits.cpu_share:.0%})")
    if dispatch and (dispatch.p99 or 0.0) > limits.dispatch_lag_p99_ms:
        reasons.append(f"dispatch lag p99 {dispatch.p99:.1f} ms > {limits.dispatch_lag_p99_ms} ms")
    if (loop_lag.p99 or 0.0) > limits.loop_lag_p99_ms:
        reasons.append(f"event-loop lag p99 {loop_lag.p99:.1f} ms > {limits.loop_lag_p99_ms} ms")
    return ClientHealth(
        cpu_share=cpu_share,
        loop_lag=loop_lag,
        dispatch_lag=dispatch,
        client_limited=bool(reasons),
        reasons=reasons,
    )


def _lag_dist(summary: dict[str, Any] | None) -> Dist:
    """The load generator summarises lags itself (n, mean, p99, max in seconds)."""
    if not summary or not summary.get("n"):
        return Dist()
    return Dist(
        n=summary["n"], mean=summary["mean"] * MS, p99=summary["p99"] * MS, max=summary["max"] * MS
    )


def spec_acceptance(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> SpecAcceptance | None:
    """Acceptance over the phase from counter deltas; never from a cumulative average."""
    if not before or not after:
        return None
    vllm_b, vllm_a = before.get("/metrics") or {}, after.get("/metrics") or {}
    drafts = _delta(vllm_b, vllm_a, "vllm:spec_decode_num_drafts_total")
    accepted = _delta(vllm_b, vllm_a, "vllm:spec_decode_num_accepted_tokens_total")
    proposed = _delta(vllm_b, vllm_a, "vllm:spec_decode_num_draft_tokens_total")
    if drafts:
        return SpecAcceptance(
            source="vLLM /metrics spec_decode counters (delta over this phase)",
            accept_length=1.0 + (accepted or 0.0) / drafts,
            accept_rate=(accepted or 0.0) / proposed if proposed else None,
        )
    sgl_b, sgl_a = before.get("/get_server_info") or {}, after.get("/get_server_info") or {}
    length = _delta(sgl_b, sgl_a, "cum_spec_accept_length")
    count = _delta(sgl_b, sgl_a, "cum_spec_accept_count")
    if count:
        return SpecAcceptance(
            source="SGLang /get_server_info cum_spec_accept_* (delta over this phase)",
            accept_length=(length or 0.0) / count,
        )
    if "avg_spec_accept_length" in sgl_a:
        return SpecAcceptance(
            source="SGLang /get_server_info",
            note="the server exposes only avg_spec_accept_length, an average since launch; "
            "it cannot be attributed to this run, so no acceptance is reported",
        )
    return None


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    if key not in before or key not in after:
        return None
    return float(after[key]) - float(before[key])
