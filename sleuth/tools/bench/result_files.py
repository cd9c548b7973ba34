"""The files `sleuth bench` writes beside a run's JSONL: a CSV of the phases and the HTML
report; and the run's request records, read from that JSONL once for both."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.tools.bench.metrics import parse_lines
from sleuth.tools.bench.models import BenchRun, Dist, PhaseMetrics, RequestRecord
from sleuth.tools.bench.report import render_html


def read_records(run: BenchRun) -> list[RequestRecord]:
    """Every request the run's JSONL recorded, warm-up requests included."""
    with open(run.jsonl, encoding="utf-8") as fh:
        _, _, records = parse_lines(fh)
    return records


def first_error(records: Sequence[RequestRecord]) -> str:
    """The first failed request's own error (the server's message with it)."""
    for record in records:
        if record.error:
            return record.error
    return "every request failed without an error message"


def write_html(run: BenchRun, records: Sequence[RequestRecord]) -> Path:
    """The self-contained HTML report, beside the JSONL."""
    path = Path(run.jsonl).with_suffix(".html")
    path.write_text(render_html(run, [r for r in records if not r.warmup]), encoding="utf-8")
    return path


def write_csv(run: BenchRun) -> Path:
    """One row per phase, beside the JSONL: the table a spreadsheet wants."""
    path = Path(run.jsonl).with_suffix(".csv")
    rows = [_csv_row(p, run.report.percentiles) for p in run.report.phases]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["phase"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _csv_row(p: PhaseMetrics, percentiles: list[float]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "phase": p.phase,
        "mode": p.mode,
        "concurrency": p.concurrency_target,
        "request_rate": p.request_rate,
        "requests": p.requests,
        "completed": p.completed,
        "failed": p.failed,
        "prompt_tokens_mean": p.prompt_tokens.mean,
        "prompt_tokens_source": p.prompt_tokens_source,
        "request_throughput": p.request_throughput,
        "output_throughput": p.output_throughput,
        "achieved_concurrency": p.concurrency,
        "goodput": p.goodput,
        "client_limited": p.client.client_limited,
    }
    for name in ("ttft", "tpot", "itl_token", "e2e"):
        d: Dist = getattr(p, name)
        row[f"{name}_mean_ms"] = d.mean
        for q in percentiles:
            row[f"{name}_p{q:g}_ms"] = d.at(q)
    return row
