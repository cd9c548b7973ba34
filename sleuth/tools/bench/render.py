"""A run as text: run_benchmark's table for the model (one line per phase, then the
warnings), and the cells that `sleuth bench` shows in its own table."""

from __future__ import annotations

from sleuth.tools.bench.models import BenchReport, BenchRun, Dist, PhaseMetrics


def cell(d: Dist, field: str = "p50") -> str:
    value = getattr(d, field)
    return "-" if value is None else f"{value:.1f}"


def load_of(p: PhaseMetrics) -> str:
    """The phase's load: c=CONCURRENCY (closed loop), r=RATE (open loop) or replay (a trace
    at its own times)."""
    if p.mode == "closed":
        return f"c={p.concurrency_target}"
    return "replay" if p.request_rate is None else f"r={p.request_rate:g}"


def phase_cells(p: PhaseMetrics) -> list[str]:
    """A phase's latencies (ms) and rates, in the order of the tables' columns: TTFT p50/p99,
    TTFT from schedule p99, TPOT p50/p99, ITL p50, E2E p50/p99, req/s, out tok/s,
    concurrency, goodput (with the share of requests meeting the SLOs)."""
    return [
        f"{cell(p.ttft)}/{cell(p.ttft, 'p99')}",
        cell(p.ttft_from_sched, "p99"),
        f"{cell(p.tpot)}/{cell(p.tpot, 'p99')}",
        cell(p.itl_chunk),
        f"{cell(p.e2e)}/{cell(p.e2e, 'p99')}",
        f"{p.request_throughput:.2f}",
        f"{p.output_throughput:.1f}",
        f"{p.concurrency:.2f}",
        "-" if p.goodput is None else f"{p.goodput:.2f} ({p.goodput_share or 0.0:.0%} met)",
    ]


def render_text(run: BenchRun) -> str:
    """A compact table for the model: one line per phase, then warnings."""
    lines = [f"benchmark on {run.host} (load generator {run.where}); records: {run.jsonl}"]
    if run.round_trip_ms and run.round_trip_ms.p50 is not None:
        lines.append(f"round trip through the port forward: p50 {run.round_trip_ms.p50:.2f} ms")
    lines.append(
        "phase load  ok/n  prompt-tok  ttft p50/p99  ttft-sched p99  tpot p50/p99  itl p50  "
        "e2e p50/p99  req/s  out tok/s  conc  goodput"
    )
    for p in run.report.phases:
        prompt = f"{cell(p.prompt_tokens, 'mean')}({p.prompt_tokens_source})"
        lines.append(
            f"{p.phase:>5} {load_of(p):<5} {p.completed}/{p.requests}  {prompt}  "
            + "  ".join(phase_cells(p))
        )
    lines.extend(warnings(run.report))
    return "\n".join(lines)


def warnings(report: BenchReport) -> list[str]:
    out = []
    for p in report.phases:
        # With no request answered, the client's own load says nothing about the server.
        if p.client.client_limited and p.completed:
            out.append(
                f"phase {p.phase}: CLIENT-LIMITED, figures understate the server: "
                + "; ".join(p.client.reasons)
            )
        if p.failed:
            out.append(f"phase {p.phase}: {p.failed} failed requests: {p.errors}")
        if p.output_len_mismatch_share:
            out.append(
                f"phase {p.phase}: {p.output_len_mismatch_share:.0%} of requests "
                "returned a different number of tokens than requested"
            )
        if p.token_mismatches:
            first = p.token_mismatches[0]
            out.append(
                f"phase {p.phase}: {len(p.token_mismatches)} requests whose usage "
                f"count differs from the stream (e.g. usage {first.usage}, stream "
                f"{first.stream}{', estimated' if first.estimated else ''}); "
                "usage is used"
            )
        if p.spec is not None:
            value = "-" if p.spec.accept_length is None else f"{p.spec.accept_length:.3f}"
            out.append(
                f"phase {p.phase}: speculative accept length this run {value} "
                f"({p.spec.source}) {p.spec.note}".rstrip()
            )
    return out
