"""engine_log_series: an engine's periodic statistics lines as a time series, from its log
file, systemd journal or container log, for engines whose /metrics is off or to see what it
logged."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.tools.context import ToolContext
from sleuth.tools.live.log_lines import LogPoint, points
from sleuth.tools.live.log_summary import in_window, summary
from sleuth.tools.live.models import Figure
from sleuth.tools.live.render import figure_line
from sleuth.tools.registry import tool
from sleuth.tools.results import cap_output
from sleuth.tools.serving.diagnose_lines import split_lines
from sleuth.tools.serving.log_source import LogSourceInput, read_log
from sleuth.transcripts.results import ToolResult

SHOWN_POINTS = 60
"""The newest points written out in the text; all of them are in the data."""


class EngineLogSeriesInput(LogSourceInput):
    lines: int = Field(20000, ge=10, le=200000, description="How many last lines to read")
    last_s: float | None = Field(
        None, gt=0, description="Only the last N seconds before the newest dated line"
    )


class LogSeries(BaseModel):
    source: str
    lines_read: int
    last_s: float | None
    points: list[LogPoint]
    summary: list[Figure]


@tool()
def engine_log_series(ctx: ToolContext, args: EngineLogSeriesInput) -> ToolResult:
    """Read an inference engine's periodic statistics lines from its log as a time series:
    SGLang's 'Decode batch' lines (#running-req, token usage = KV pool share in use, accept
    len = mean acceptance LENGTH, accept rate = acceptance RATE, gen throughput, #queue-req)
    and 'Prefill batch' lines (#new-token, #cached-token, input throughput), its retractions
    ('Decode out of memory happened. #retracted_reqs'); vLLM's 'Avg prompt throughput ...'
    lines (running, waiting, GPU KV cache usage, prefix cache hit rate), 'SpecDecoding
    metrics' lines and preemption warnings. Use it when SGLang runs without --enable-metrics,
    or to see the history the log holds; on a container or pod host, container_log=true reads
    the container's own log. last_s keeps the last N seconds before the newest
    dated line. Returns the points (each with its line number and line) and a summary whose
    every figure names the lines and field it was computed from (a line several SGLang ranks
    logged in the same second counted once). Read-only.
    """
    host = ctx.host(args.host)
    source, text, argv = read_log(host, args, args.lines)
    lines = split_lines(text)[-args.lines :]
    found = in_window(points(lines), args.last_s)
    series = LogSeries(
        source=source,
        lines_read=len(lines),
        last_s=args.last_s,
        points=found,
        summary=summary(found),
    )
    text_out, cut = cap_output(
        _render(series), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(
        ok=True, output=text_out, data=series.model_dump(mode="json"), argv=argv, bytes_cut=cut
    )


def _render(series: LogSeries) -> str:
    window = f", last {series.last_s:g} s" if series.last_s else ""
    head = (
        f"{series.source}: {series.lines_read} lines read{window}; "
        f"{len(series.points)} statistics lines"
    )
    if not series.points:
        return head + (
            "\nNo engine statistics lines found (SGLang 'Decode batch'/'Prefill batch', vLLM "
            "'Avg prompt throughput'/'SpecDecoding metrics'): is this the engine's log, and "
            "is its log level at least INFO?\n"
        )
    out = [head, "summary:"] + [f"  {figure_line(f)}" for f in series.summary]
    shown = series.points[-SHOWN_POINTS:]
    if len(shown) < len(series.points):
        out.append(f"last {len(shown)} of {len(series.points)} points (all are in the data):")
    else:
        out.append("points:")
    out += [f"  {p.line_no}: {p.line}" for p in shown]
    return "\n".join(out) + "\n"
