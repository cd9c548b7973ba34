"""query_metrics: the engines' history in Prometheus, asked as named questions (the PromQL
written for the engine in use) or as raw PromQL; results as small tables with the exact
PromQL, and every cap said."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, Field, field_validator, model_validator

from sleuth.errors import ErrorKind
from sleuth.tools.context import ToolContext
from sleuth.tools.live.prometheus import Answer, Prometheus
from sleuth.tools.live.promql import (
    DETECT,
    LABEL_NAME,
    RECIPES,
    Engine,
    Question,
    build,
    candidates_query,
)
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


class QueryMetricsInput(ToolInput):
    question: Question | None = Field(
        None, description="A named question; the PromQL is written for the engine in use"
    )
    promql: str | None = Field(None, max_length=4000, description="Or raw PromQL")
    range_s: int = Field(
        300,
        ge=10,
        le=30 * 86400,
        description="The window: a named question's [range]; a raw range query's span",
    )
    step_s: int | None = Field(
        None, ge=1, description="Raw PromQL only: ask a range query with this step"
    )
    by: list[str] = Field(
        default_factory=lambda: ["model_name"],
        description="Named questions: the labels to group by, e.g. ['instance'] or ['pod']",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Named questions: only series with these labels"
    )
    engine: Engine | None = Field(
        None, description="vllm or sglang; found from the data if omitted"
    )

    @field_validator("by")
    @classmethod
    def _names(cls, by: list[str]) -> list[str]:
        for name in by:
            if not LABEL_NAME.match(name):
                raise ValueError(f"{name!r} is not a Prometheus label name")
        return by

    @field_validator("labels")
    @classmethod
    def _label_names(cls, labels: dict[str, str]) -> dict[str, str]:
        for name in labels:
            if not LABEL_NAME.match(name):
                raise ValueError(f"{name!r} is not a Prometheus label name")
        return labels

    @model_validator(mode="after")
    def _one(self) -> QueryMetricsInput:
        if (self.question is None) == (self.promql is None):
            raise ValueError("give exactly one of question (a named question) or promql")
        return self


class Row(BaseModel):
    labels: dict[str, str]
    value: float | None = None
    """An instant query's value."""
    points: int = 0
    min: float | None = None
    mean: float | None = None
    max: float | None = None
    last: float | None = None


class MetricsTable(BaseModel):
    question: str | None
    engine: str | None
    promql: str
    at: float
    """The evaluation time (unix seconds; a range query's end)."""
    range_s: int
    step_s: int | None = None
    unit: str = ""
    rows: list[Row]
    series_not_shown: int = 0
    caps: list[str] = Field(default_factory=list)


@tool()
def query_metrics(ctx: ToolContext, args: QueryMetricsInput) -> ToolResult:
    """Ask the Prometheus in sleuth.toml ([prometheus] url) about the engines' history.

    Named questions write the PromQL for the engine whose series Prometheus holds (vLLM or
    SGLang, across metric renames) over the last range_s seconds, grouped `by` labels:
    request_rate, generation_throughput, prompt_throughput, ttft_p50/p99, tpot_p50/p99,
    itl_p50/p99, e2e_p99 (from the histograms), acceptance_rate (accepted/drafted draft
    tokens, 0-1), acceptance_length (tokens per verify step, 1 + accepted/drafts: NOT the
    rate), kv_usage_peak (the KV POOL's peak share in use, all requests together; not one
    request's context), waiting_peak, preemptions (SGLang: retractions). Or raw `promql`:
    an instant query, or with step_s a range query over range_s. Every answer shows the
    exact PromQL (paste it into Grafana) and its evaluation time; ranges are capped in
    points and series, and the cap is said. The `host` input is not used: Prometheus is
    queried from where Sleuth runs. Read-only.
    """
    prom = Prometheus(ctx.prometheus)
    at = float(int(time.time()))
    if args.question is not None:
        table = _named(prom, args, at)
    else:
        table = _raw(prom, args, at, ctx.prometheus.max_points)
    text, cut = cap_output(_render(table), ctx.limits.max_output_bytes, ctx.limits.max_output_lines)
    return ToolResult(ok=True, output=text, data=table.model_dump(mode="json"), bytes_cut=cut)


def _named(prom: Prometheus, args: QueryMetricsInput, at: float) -> MetricsTable:
    question = args.question or "request_rate"
    engine = args.engine or _engine(prom, at)
    recipe = RECIPES[question][engine]
    present = {
        s.labels.get("__name__", "") for s in prom.instant(candidates_query(recipe), at).series
    }
    promql = build(recipe, present, args.by, args.labels, args.range_s)
    if promql is None:
        wanted = ", ".join(n for options in recipe.series.values() for n in options)
        raise ToolError(
            f"Prometheus holds none of the series {question} needs for {engine} ({wanted}): is "
            "the engine scraped, and (SGLang) started with --enable-metrics?",
            ErrorKind.NOT_FOUND,
        )
    table = _table(prom.instant(promql, at), promql, at, args.range_s, prom.settings.max_series)
    table.question, table.engine, table.unit = question, engine, recipe.unit
    return table


def _engine(prom: Prometheus, at: float) -> Engine:
    found = {s.labels.get("__name__", "") for s in prom.instant(DETECT, at).series}
    engines: list[Engine] = [
        e for e in ("vllm", "sglang") if f"{e}:generation_tokens_total" in found
    ]
    if len(engines) == 1:
        return engines[0]
    if not engines:
        raise ToolError(
            "Prometheus holds no vLLM or SGLang series (vllm:generation_tokens_total, "
            "sglang:generation_tokens_total): is the engine scraped?",
            ErrorKind.NOT_FOUND,
        )
    raise ToolError("Prometheus holds both vLLM and SGLang series: pass engine='vllm' or 'sglang'")


def _raw(prom: Prometheus, args: QueryMetricsInput, at: float, max_points: int) -> MetricsTable:
    promql = args.promql or ""
    if args.step_s is None:
        return _table(prom.instant(promql, at), promql, at, args.range_s, prom.settings.max_series)
    step, caps = args.step_s, []
    if args.range_s // step + 1 > max_points:
        step = -(-args.range_s // (max_points - 1))
        caps.append(
            f"step raised from {args.step_s} s to {step} s to stay within {max_points} points "
            "per series ([prometheus] max_points)"
        )
    answer = prom.range(promql, at - args.range_s, at, step)
    table = _table(answer, promql, at, args.range_s, prom.settings.max_series)
    table.step_s, table.caps = step, caps + table.caps
    return table


def _table(answer: Answer, promql: str, at: float, range_s: int, max_series: int) -> MetricsTable:
    rows = []
    for series in answer.series[:max_series]:
        values = [v for _, v in series.values if v is not None]
        if answer.kind == "matrix":
            rows.append(
                Row(
                    labels=series.labels,
                    points=len(series.values),
                    min=min(values, default=None),
                    max=max(values, default=None),
                    mean=sum(values) / len(values) if values else None,
                    last=values[-1] if values else None,
                )
            )
        else:
            rows.append(Row(labels=series.labels, value=values[0] if values else None, points=1))
    hidden = max(0, len(answer.series) - max_series)
    caps = (
        [f"{hidden} more series not shown ([prometheus] max_series = {max_series})"]
        if hidden
        else []
    )
    return MetricsTable(
        question=None,
        engine=None,
        promql=promql,
        at=at,
        range_s=range_s,
        rows=rows,
        series_not_shown=hidden,
        caps=caps,
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def _render(t: MetricsTable) -> str:
    when = datetime.fromtimestamp(t.at, UTC).isoformat(timespec="seconds")
    head = [f"{t.question} ({t.engine}, last {t.range_s} s)" if t.question else "raw PromQL"]
    head.append(f"PromQL: {t.promql}")
    step = f", step {t.step_s} s over {t.range_s} s" if t.step_s else ""
    head.append(f"evaluated at {when} (unix {t.at:.0f}){step}")
    head += [f"cap: {c}" for c in t.caps]
    if not t.rows:
        return "\n".join([*head, "no series matched (empty result)"]) + "\n"
    keys = sorted({k for r in t.rows for k in r.labels})
    unit = f" ({t.unit})" if t.unit else ""
    if t.step_s:
        cols = [*keys, "points", "min", "mean", "max", "last"]
        body = [
            [
                *(r.labels.get(k, "") for k in keys),
                str(r.points),
                _fmt(r.min),
                _fmt(r.mean),
                _fmt(r.max),
                _fmt(r.last),
            ]
            for r in t.rows
        ]
    else:
        cols = [*keys, f"value{unit}"]
        body = [[*(r.labels.get(k, "") for k in keys), _fmt(r.value)] for r in t.rows]
    widths = [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join([*head, *(line.rstrip() for line in lines)]) + "\n"
