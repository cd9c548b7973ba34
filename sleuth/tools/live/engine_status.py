"""engine_status: which engine answers on a host port, however it was started, what it serves,
its effective settings and health, and, with a window, its rates now."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from sleuth.tools.context import ToolContext
from sleuth.tools.live.identify import engine_of, fill
from sleuth.tools.live.models import EngineReport, EngineStatus
from sleuth.tools.live.probe import Listener, Target, probe
from sleuth.tools.live.prom import Sample, parse
from sleuth.tools.live.render import render
from sleuth.tools.live.series import gauge_prefixes
from sleuth.tools.live.window import Reading, now_figures, window_figures
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.secret_keys import secret_key_label

WELL_KNOWN_PORTS = [8000, 30000]
"""vLLM's and SGLang's default ports: probed when listening, whoever owns them."""
MAX_WINDOW_S = 300.0


class EngineStatusInput(ToolInput):
    port: int | None = Field(None, ge=1, le=65535, description="Port on the host, e.g. 30000")
    url: str | None = Field(
        None,
        description="Or the server's URL as the host itself sees it, e.g. http://127.0.0.1:8000 "
        "(only the host's own addresses are read)",
    )
    window_s: float = Field(
        0.0,
        ge=0.0,
        le=MAX_WINDOW_S,
        description="Sample /metrics over this many seconds and report rates over the window "
        "(needs port or url); 0 reads once",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(f"url {url!r} must be http://HOST:PORT as the host sees it")
        return url

    @model_validator(mode="after")
    def _one_target(self) -> EngineStatusInput:
        if self.port is not None and self.url is not None:
            raise ValueError("give port or url, not both")
        if self.window_s and self.port is None and self.url is None:
            raise ValueError("window_s needs one server: give its port or url")
        return self

    def target(self) -> tuple[str, int] | None:
        if self.url is not None:
            parts = urlsplit(self.url)
            return parts.hostname or "", parts.port or 80
        return None if self.port is None else ("127.0.0.1", self.port)


@tool()
def engine_status(ctx: ToolContext, args: EngineStatusInput) -> ToolResult:
    """Report on an inference engine (vLLM, SGLang) running on a host, however it was started
    (systemd, a container, a script): which engine and version answers on the port, its
    served models and max_model_len, its effective settings (SGLang's /get_server_info;
    vLLM's cache_config_info labels and its command line), its health, and its /metrics now.
    Without port or url, finds the engines listening on the host and reports each.

    window_s=N samples /metrics for N seconds and reports, over that window: request rate,
    prompt and generation tokens/s, speculative acceptance rate and mean acceptance length,
    prefix-cache hit rate, KV usage max and mean, running and waiting requests, preemptions
    (SGLang: retractions). Every figure names the series it came from. Without a window,
    counters are totals SINCE LAUNCH, not the current rate: use a window for "now".

    Do not confuse: acceptance RATE (accepted draft tokens / drafted, 0-1) with mean
    acceptance LENGTH (tokens emitted per verify step, 1 + accepted/drafts, up to k+1); KV
    usage (the share of the whole KV pool in use, all requests together) with one
    request's context length (max_model_len). SGLang without --enable-metrics has no
    /metrics: read its decode log lines with engine_log_series instead. Read-only.
    """
    sandbox = ctx.host(args.host)
    target = args.target()
    if target is None:  # the engines' pids say which ports to probe
        processes = _processes(ctx, args.host)
        answer, argv = probe(
            sandbox,
            None,
            pids=[int(p["pid"]) for p in processes],
            ports=WELL_KNOWN_PORTS,
            gauge_prefixes=gauge_prefixes(None),
        )
    else:  # the process scan runs beside the probe: one host program's start, not two
        with ThreadPoolExecutor(max_workers=1) as pool:
            scan = pool.submit(_processes, ctx, args.host)
            answer, argv = probe(
                sandbox, [target], window_s=args.window_s, gauge_prefixes=gauge_prefixes(None)
            )
            processes = scan.result()
    reports = [_report(t, answer.listening, processes, args.window_s) for t in answer.targets]
    status = EngineStatus(
        host=args.host,
        engines=reports,
        listening_ports=sorted({e.port for e in answer.listening}) if target is None else [],
    )
    text, cut = cap_output(render(status), ctx.limits.max_output_bytes, ctx.limits.max_output_lines)
    return ToolResult(
        ok=True, output=text, data=status.model_dump(mode="json"), argv=[argv], bytes_cut=cut
    )


def _processes(ctx: ToolContext, host: str) -> list[dict[str, Any]]:
    """server_processes' data, through the call pipeline (its own record)."""
    if ctx.subcall is None:
        return []
    result = ctx.subcall("server_processes", {"host": host})
    return list((result.data or {}).get("processes", [])) if result.ok else []


def _report(
    target: Target,
    listening: list[Listener],
    processes: list[dict[str, Any]],
    window_s: float,
) -> EngineReport:
    report = EngineReport(host=target.host, port=target.port, engine=None)
    if target.refused:
        report.problems.append(target.refused)
        return report
    first = next(iter(target.pages.values()), None)
    if first is None or first.status is None:
        why = first.error if first is not None else "not probed"
        report.problems.append(f"nothing answers HTTP on {target.host}:{target.port}: {why}")
        return report
    page = target.pages.get("/metrics")
    metrics = _samples(page.text if page is not None and page.status == 200 else None, report)
    report.engine = engine_of(target, metrics)
    fill(report, target, metrics)
    _process(report, target, listening, processes)
    if report.engine is None:
        report.problems.append("the answers match neither vLLM nor SGLang")
        return report
    _metrics_note(report, page)
    if metrics:
        report.now = now_figures(report.engine, metrics)
    if window_s and target.window:
        readings = [Reading(p.at, parse(p.text or "")) for p in target.window if p.status == 200]
        if len(readings) >= 2:
            report.window_s = round(readings[-1].at - readings[0].at, 3)
            report.window_start = readings[0].at
            report.window = window_figures(report.engine, readings)
        else:
            report.problems.append("the window's last /metrics read failed: no rates")
    return report


def _samples(text: str | None, report: EngineReport) -> list[Sample]:
    if text is None:
        return []
    try:
        return parse(text)
    except ToolError as exc:
        report.problems.append(str(exc))
        return []


def _metrics_note(report: EngineReport, page: Any) -> None:
    report.metrics_available = page is not None and page.status == 200
    if report.metrics_available:
        return
    said = "no answer" if page is None else f"HTTP {page.status or page.error}"
    if report.engine == "sglang":
        report.metrics_note = (
            f"/metrics: {said}. SGLang serves metrics only when started with --enable-metrics; "
            "its 'Decode batch' log lines carry the same figures (engine_log_series reads them)"
        )
    else:
        report.metrics_note = f"/metrics: {said}"


def _process(
    report: EngineReport,
    target: Target,
    listening: list[Listener],
    processes: list[dict[str, Any]],
) -> None:
    owners = {e.pid for e in listening if e.port == target.port and e.pid is not None}
    for proc in processes:
        flags = {f.get("name"): f.get("value") for f in proc.get("flags", [])}
        if proc.get("pid") in owners or flags.get("--port") == str(target.port):
            report.pid = int(proc["pid"])
            report.argv = _argv_redacted([str(a) for a in proc.get("argv", [])])
            return
    report.pid = next(iter(owners), None)


def _argv_redacted(argv: list[str]) -> list[str]:
    """`--api-key VALUE` and `--api-key=VALUE` with the value hidden, by the flag's name."""
    out: list[str] = []
    hide_next, mark = False, ""
    for arg in argv:
        if hide_next:
            out.append(mark)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        label = secret_key_label(name.lstrip("-")) if arg.startswith("--") else None
        mark = f"[REDACTED:by-key {label}]"
        out.append(f"{name}={mark}" if label and eq else arg)
        hide_next = bool(label) and not eq
    return out
