"""A run in the JSON layout of aiperf's `profile_export_aiperf.json` or inference-perf's
`summary_lifecycle_metrics.json`, so dashboards that read those read Sleuth's runs too.

```python
paths = export(run, records, "aiperf", Path("profile_export_aiperf.json"))
```

Field names, units and statistics follow each tool's own export: aiperf gives latencies in
ms as {unit, avg, p1..p99, min, max, std}; inference-perf gives seconds as {mean, min,
p0.1.., median, .., max}. Each tool's definitions are kept: request_latency runs to the
last response (usage and [DONE] included); aiperf's inter_token_latency is per request
(E2E - TTFT) / (tokens - 1), Sleuth's TPOT; inference-perf's inter_token_latency is every
gap between tokens, a chunk's tokens sharing its arrival time. A run of several phases is
exported one file per phase (NAME-phaseK.json).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sleuth.tools.bench.metrics import gaps, meets, percentile, tpot
from sleuth.tools.bench.models import BenchRun, PhaseMetrics, RequestRecord, Slo

Format = Literal["aiperf", "inference-perf"]
AIPERF_PCTS = (1, 5, 10, 25, 50, 75, 90, 95, 99)
INFERENCE_PERF_PCTS = (0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9)


def export(
    run: BenchRun, records: Sequence[RequestRecord], fmt: Format, target: Path
) -> list[Path]:
    """Write the run in `fmt`'s layout to `target` (one file per phase when several)."""
    make: Callable[..., dict[str, Any]] = aiperf if fmt == "aiperf" else inference_perf
    phases = run.report.phases
    out = []
    for phase in phases:
        mine = [r for r in records if r.phase == phase.phase and not r.warmup]
        path = (
            target
            if len(phases) == 1
            else target.with_name(f"{target.stem}-phase{phase.phase}{target.suffix}")
        )
        path.write_text(json.dumps(make(run, phase, mine), indent=2) + "\n", encoding="utf-8")
        out.append(path)
    return out


def aiperf(run: BenchRun, phase: PhaseMetrics, records: Sequence[RequestRecord]) -> dict[str, Any]:
    """One phase as aiperf's profile_export_aiperf.json."""
    ok = [r for r in records if r.ok]
    header = run.report.header
    span = phase.duration_s
    doc: dict[str, Any] = {
        "schema_version": "1.0",
        "benchmark_id": Path(run.jsonl).stem,
        "request_throughput": {"unit": "requests/sec", "avg": phase.request_throughput},
        "request_latency": _aiperf_dist("ms", [(r.t_done - r.t_send) * 1e3 for r in ok]),
        "time_to_first_token": _aiperf_dist("ms", [_ttft(r) * 1e3 for r in ok]),
        "inter_token_latency": _aiperf_dist("ms", [t * 1e3 for r in ok if (t := tpot(r))]),
        "output_token_throughput_per_user": _aiperf_dist(
            "tokens/sec/user", [1.0 / t for r in ok if (t := tpot(r))]
        ),
        "output_sequence_length": _aiperf_dist("tokens", [float(r.output_tokens) for r in ok]),
        "input_sequence_length": _aiperf_dist("tokens", [float(_isl(r)) for r in ok]),
        "output_token_throughput": {"unit": "tokens/sec", "avg": phase.output_throughput},
        "total_token_throughput": {"unit": "tokens/sec", "avg": phase.total_throughput},
        "request_count": {"unit": "requests", "avg": float(len(ok))},
        "benchmark_duration": {"unit": "sec", "avg": span},
        "total_isl": {"unit": "tokens", "avg": float(sum(_isl(r) for r in ok))},
        "total_osl": {"unit": "tokens", "avg": float(sum(r.output_tokens for r in ok))},
        "was_cancelled": False,
        "error_summary": _aiperf_errors(records),
        "start_time": _iso(header, min((r.t_send for r in records), default=0.0)),
        "end_time": _iso(header, max((r.t_done for r in records), default=0.0)),
        "input_config": {
            "endpoint": {
                "model_names": [header.get("model")],
                "type": header.get("api"),
                "streaming": True,
                "urls": [header.get("url")],
            },
            "loadgen": {
                "concurrency": phase.concurrency_target,
                "request_rate": phase.request_rate,
            },
        },
    }
    if phase.failed:
        doc["error_request_count"] = {"unit": "requests", "avg": float(phase.failed)}
    if phase.goodput is not None:
        good = sum(meets(r, run.report.slo) for r in ok)
        doc["goodput"] = {"unit": "requests/sec", "avg": phase.goodput}
        doc["good_request_count"] = {"unit": "requests", "avg": float(good)}
    return doc


def inference_perf(
    run: BenchRun, phase: PhaseMetrics, records: Sequence[RequestRecord]
) -> dict[str, Any]:
    """One phase as inference-perf's summary_lifecycle_metrics.json (seconds)."""
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    start = min((r.t_send for r in records), default=0.0)
    total = max(max((r.t_done for r in records), default=start) - start, 1e-9)
    load: dict[str, Any] = {
        "count": len(records),
        "schedule_delay": _ip_dist([r.t_send - r.t_sched for r in records]),
    }
    if phase.mode == "open" and phase.request_rate is not None:
        sends = [r.t_send for r in records]
        send_s = max(sends) - min(sends) if sends else 0.0
        load.update(
            send_duration=send_s,
            requested_rate=phase.request_rate,
            achieved_rate=len(records) / send_s if send_s > 0 else 0.0,
        )
    n_in = sum(_isl(r) for r in ok)
    n_out = sum(r.output_tokens for r in ok)
    successes: dict[str, Any] = {
        "count": len(ok),
        "latency": {
            "request_latency": _ip_dist([r.t_done - r.t_send for r in ok]),
            "normalized_time_per_output_token": _ip_dist(
                [(r.t_done - r.t_send) / r.output_tokens for r in ok if r.output_tokens]
            ),
            "time_per_output_token": _ip_dist([t for r in ok if (t := tpot(r)) is not None]),
            "time_to_first_token": _ip_dist([_ttft(r) for r in ok]),
            "inter_token_latency": _ip_dist([d for r in ok for d in _token_deltas(r)]),
        },
        "throughput": {
            "input_tokens_per_sec": n_in / total,
            "output_tokens_per_sec": n_out / total,
            "total_tokens_per_sec": (n_in + n_out) / total,
            "requests_per_sec": len(ok) / total,
        },
        "prompt_len": _ip_dist([float(_isl(r)) for r in ok]),
        "output_len": _ip_dist([float(r.output_tokens) for r in ok]),
    }
    if phase.goodput is not None:
        successes["goodput_metrics"] = _ip_goodput(run.report.slo, ok, total)
    return {
        "load_summary": load,
        "successes": successes,
        "failures": {
            "count": len(failed),
            "request_latency": _ip_dist([r.t_done - r.t_send for r in failed]),
            "prompt_len": _ip_dist([float(r.input_words) for r in failed]),
        },
    }


def _ttft(r: RequestRecord) -> float:
    return (r.t_first or r.t_send) - r.t_send


def _isl(r: RequestRecord) -> int:
    reported = (r.usage or {}).get("prompt_tokens")
    if isinstance(reported, int):
        return reported
    return r.input_tokens_client if r.input_tokens_client is not None else r.input_words


def _token_deltas(r: RequestRecord) -> list[float]:
    """Gaps between consecutive tokens when a chunk's tokens all arrive at its time."""
    out = []
    for gap, n in gaps(r):
        out.append(gap)
        out += [0.0] * max(round(n) - 1, 0)
    return out


def _stats(values: Sequence[float], pcts: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    mean = sum(ordered) / len(ordered)
    out = {"mean": mean, "min": ordered[0], "max": ordered[-1]}
    out.update({f"p{q:g}": percentile(ordered, q) for q in pcts})
    out["std"] = math.sqrt(sum((v - mean) ** 2 for v in ordered) / len(ordered))
    return out


def _aiperf_dist(unit: str, values: Sequence[float]) -> dict[str, Any]:
    stats = _stats(values, AIPERF_PCTS)
    if stats is None:
        return {"unit": unit, "avg": None}
    return {"unit": unit, "avg": stats.pop("mean"), **stats}


def _ip_dist(values: Sequence[float]) -> dict[str, float] | None:
    stats = _stats(values, INFERENCE_PERF_PCTS)
    if stats is None:
        return None
    stats.pop("std")
    stats["median"] = stats.pop("p50")
    order = ["mean", "min", *(f"p{q:g}" if q != 50 else "median" for q in INFERENCE_PERF_PCTS)]
    return {k: stats[k] for k in [*order, "max"]}


def _ip_goodput(slo: Slo, ok: Sequence[RequestRecord], total: float) -> dict[str, Any]:
    good = [r for r in ok if meets(r, slo)]
    tokens = sum(_isl(r) + r.output_tokens for r in good)
    out: dict[str, Any] = {
        "goodput_percentage": len(good) / len(ok) * 100 if ok else 0.0,
        "request_goodput": len(good) / total,
        "token_goodput": tokens / total,
        "good_requests": len(good),
        "total_requests": len(ok),
    }
    for name, limit in (
        ("ttft", slo.ttft_ms),
        ("tpot", slo.tpot_ms),
        ("request_latency", slo.e2e_ms),
    ):
        if limit is not None:
            one = Slo(**{f"{'e2e' if name == 'request_latency' else name}_ms": limit})
            hit = sum(meets(r, one) for r in ok)
            out[f"{name}_attainment_percentage"] = hit / len(ok) * 100 if ok else 0.0
    return out


def _aiperf_errors(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    counts: dict[tuple[int | None, str], int] = {}
    for r in records:
        if not r.ok:
            key = (r.status, r.error or "no token received")
            counts[key] = counts.get(key, 0) + 1
    return [
        {
            "error_details": {"code": code, "type": msg.split(":", 1)[0], "message": msg},
            "count": n,
        }
        for (code, msg), n in sorted(counts.items(), key=lambda kv: -kv[1])
    ]


def _iso(header: dict[str, Any], t: float) -> str | None:
    zero = header.get("epoch_at_zero")
    if not isinstance(zero, (int, float)):
        return None
    return datetime.fromtimestamp(zero + t, UTC).isoformat()
