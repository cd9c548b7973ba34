"""Live: questions about a server that is running now, whoever started it. "Is speculative
decoding working on the server at :30000, and what is its acceptance over the last 5
minutes?", "why is TTFT high right now?". engine_status over a window answers from /metrics;
query_metrics adds Prometheus's history when sleuth.toml names one; every finding quotes the
figure lines it rests on."""

from __future__ import annotations

import re

from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, Result, summary_text
from sleuth.tools.live.models import EngineReport, EngineStatus, Figure
from sleuth.tools.live.query_metrics import MetricsTable

WINDOW_S = 10
"""engine_status's window unless the question says "last N seconds" (2 to 60): long enough
for several samples of the gauges, short enough to wait for."""
SPEC_WORDS = ("speculative", "spec decod", "acceptance", "accept len", "mtp", "eagle", "draft")
TTFT_WORDS = ("ttft", "time to first token", "first token", "slow", "latency", "queue")
NOW_WORDS = ("right now", "currently", "running server", "live", "at the moment", "server at")
PORT = re.compile(r"(?:port |:)(\d{2,5})\b")
MINUTES = re.compile(r"last (\d+) ?(?:min|minute)")
SECONDS = re.compile(r"last (\d+) ?(?:s|sec|secs|seconds)\b")
MAX_WINDOW_S = 60


def _claims(q: Question) -> bool:
    if q.paths:  # a model folder named: serving and benchmarking it is the serve family's
        return False
    said = q.text.lower()
    return bool(PORT.search(q.text) or MINUTES.search(said) or SECONDS.search(said)) or q.has(
        *NOW_WORDS
    )


def plan_live(q: Question) -> Plan:
    port_match = PORT.search(q.text)
    port = int(port_match.group(1)) if port_match else None
    minutes = MINUTES.search(q.text.lower())
    history_s = int(minutes.group(1)) * 60 if minutes else 300
    seconds = SECONDS.search(q.text.lower())
    window_s = min(MAX_WINDOW_S, max(2, int(seconds.group(1)))) if seconds else WINDOW_S
    status_input: dict[str, object] = {"host": q.host, "window_s": window_s}
    if port is not None:
        status_input["port"] = port
    else:
        status_input = {"host": q.host}  # find the engines first; a window needs one
    (status,) = yield [Call("engine_status", status_input)]
    engine = _engine(status)
    if port is None and engine is not None and not status.is_error:
        (status,) = yield [
            Call("engine_status", {"host": q.host, "port": engine.port, "window_s": window_s})
        ]
        engine = _engine(status)
    if engine is None or engine.engine is None:
        report = _no_engine(q, status, port)
        yield [report]
        return summary_text([report])
    spec = q.has(*SPEC_WORDS)
    asks = ["acceptance_length", "acceptance_rate"] if spec else ["ttft_p99", "waiting_peak"]
    history = yield [
        Call("query_metrics", {"host": q.host, "question": name, "range_s": history_s})
        for name in asks
    ]
    reports = (
        _spec_reports(engine, status, history, history_s)
        if spec
        else _ttft_reports(engine, status, history, history_s)
    )
    yield reports
    return summary_text(reports)


def _engine(status: Result) -> EngineReport | None:
    found = status.model(EngineStatus)
    engines = [e for e in found.engines if e.engine] if found else []
    return engines[0] if engines else (found.engines[0] if found and found.engines else None)


def _no_engine(q: Question, status: Result, port: int | None) -> Report:
    where = f"port {port}" if port else "any port"
    said = status.line("problem") or status.line("no inference engine") or status.line()
    return Report(
        f"No vLLM or SGLang engine answers on {q.host} at {where}.",
        "no",
        0.8,
        [(status, said)],
        ["engine_status without a port lists the engines listening on the host"],
    )


def _figure(engine: EngineReport, name: str) -> Figure | None:
    return next((f for f in engine.window if f.name == name and f.value is not None), None)


def _quote(status: Result, figure: Figure | None) -> tuple[Result, str | None]:
    return status, status.line(f"{figure.name}:") if figure else None


def _history(results: list[Result], history_s: int) -> list[Report]:
    reports = []
    for result in results:
        table = result.model(MetricsTable)
        if table is None or not table.rows:
            continue
        values = ", ".join(
            f"{'/'.join(r.labels.values()) or 'all'} {r.value:.3g}"
            for r in table.rows
            if r.value is not None
        )
        reports.append(
            Report(
                f"Prometheus over the last {history_s // 60} min: {table.question} = {values} "
                f"({table.unit}); PromQL: {table.promql}",
                "yes",
                0.85,
                [(result, result.line("PromQL:"))],
            )
        )
    return reports


def _spec_reports(
    engine: EngineReport, status: Result, history: list[Result], history_s: int
) -> list[Report]:
    length = _figure(engine, "spec_mean_accept_length") or _figure(
        engine, "spec_mean_accept_length_mean"
    )
    rate = _figure(engine, "spec_acceptance_rate") or _figure(engine, "spec_acceptance_rate_mean")
    where = f"{engine.engine} on port {engine.port}"
    if length is None and rate is None:
        said = engine.metrics_note or "no speculative-decoding series moved in the window"
        report = Report(
            f"No speculative-decoding acceptance could be measured on {where} over the last "
            f"{engine.window_s or WINDOW_S:.0f} s: {said}.",
            "unknown",
            0.6,
            [(status, status.line(engine.engine or "", "port") or status.line())],
            [
                "check the launch flags (--speculative-config / --speculative-algorithm)",
                "SGLang without --enable-metrics: engine_log_series on its log",
            ],
        )
        return [report, *_history(history, history_s)]
    working = length is not None and length.value is not None and length.value > 1.05
    parts = []
    if length is not None:
        parts.append(f"mean acceptance length {length.value:.2f} tokens per verify step")
    if rate is not None:
        parts.append(f"draft acceptance rate {rate.value:.2f}")
    claim = (
        f"Speculative decoding on {where} is {'working' if working else 'NOT paying off'}: "
        f"{' and '.join(parts)} over the last {engine.window_s or WINDOW_S:.0f} s "
        "(length counts the bonus token: 1.0 means every draft was rejected)."
    )
    evidence = [q for q in (_quote(status, length), _quote(status, rate)) if q[1]]
    return [
        Report(claim, "yes" if working else "no", 0.85, evidence),
        *_history(history, history_s),
    ]


def _ttft_reports(
    engine: EngineReport, status: Result, history: list[Result], history_s: int
) -> list[Report]:
    waiting = _figure(engine, "waiting_max")
    kv = _figure(engine, "kv_usage_max")
    preempt = _figure(engine, "preemptions")
    prompt = _figure(engine, "prompt_tokens_per_s")
    gen = _figure(engine, "generation_tokens_per_s")
    causes: list[tuple[str, Figure]] = []
    if waiting and waiting.value and waiting.value > 0:
        causes.append((f"requests queue (up to {waiting.value:.0f} waiting)", waiting))
    if kv and kv.value is not None and kv.value >= 0.9:
        causes.append((f"the KV pool is {kv.value:.0%} full at its peak", kv))
    if preempt and preempt.value:
        causes.append((f"{preempt.value:.0f} preemptions in the window", preempt))
    if prompt and gen and prompt.value and gen.value is not None:
        share = prompt.value / (prompt.value + gen.value)
        if share >= 0.8:
            causes.append((f"prefill is {share:.0%} of the tokens processed", prompt))
    where = f"{engine.engine} on port {engine.port}"
    span = f"over the last {engine.window_s or WINDOW_S:.0f} s"
    if causes:
        claim = f"TTFT on {where} {span}: " + "; ".join(c for c, _ in causes) + "."
        evidence = [_quote(status, f) for _, f in causes]
        verdict, confidence = "yes", 0.8
    else:
        claim = (
            f"No queueing, KV-pool pressure or preemption on {where} {span}: high TTFT is not "
            "from load here; look at prompt length, chunked prefill and the client's path."
        )
        evidence = [_quote(status, f) for f in (waiting, kv) if f] or [(status, status.line())]
        verdict, confidence = "no", 0.6
    return [Report(claim, verdict, confidence, evidence), *_history(history, history_s)]


FAMILY = Family(
    name="live",
    help="live: a running server, however started: is speculative decoding working on the "
    "server at :30000, what is its acceptance now; why is TTFT high right now",
    plan=plan_live,
    claims=_claims,
    rank=8,
)
