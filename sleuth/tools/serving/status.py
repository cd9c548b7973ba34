"""server_status: what a server Sleuth started is doing, or which servers there are.

For one server, server_ctl's `status` fetches the engine's own pages on the host's loopback
(STATUS_PATHS); this module reads them into a `ServerStatus` and renders it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.live.prom import parse, total
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.tools.serving.ctl import (
    SERVER_ID_PATTERN,
    HttpAnswer,
    IgnoredRecord,
    Listing,
    ServerRecord,
    Status,
    ctl,
)
from sleuth.tools.serving.data import ServerList, ServerStatus, ServerSummary, VllmMetrics
from sleuth.tools.serving.env_scrub import status_scrubber
from sleuth.tools.serving.stop import stop_command
from sleuth.transcripts.redact import clean_cut, redact
from sleuth.transcripts.results import ToolResult

# What server_status fetches; /server_info is the newer name of SGLang's /get_server_info.
STATUS_PATHS = {
    "sglang": ["/v1/models", "/get_server_info", "/server_info"],
    "vllm": ["/v1/models", "/metrics"],
    "command": ["/v1/models"],
}

# vLLM /metrics families worth showing: load, KV cache use and speculative decoding.
VLLM_METRIC_PREFIXES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:spec_decode_",
)
SGLANG_INFO_KEYS = (
    "version",
    "model_path",
    "tp_size",
    "quantization",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "max_total_num_tokens",
    "attention_backend",
)
PER_RANK = ("avg_spec_accept_length", "last_gen_throughput")


class ServerStatusInput(ToolInput):
    server_id: str | None = Field(
        None, pattern=SERVER_ID_PATTERN, description="From launch_server; omit to list servers"
    )


@tool()
def server_status(ctx: ToolContext, args: ServerStatusInput) -> ToolResult:
    """Report on a server started by launch_server: alive, ready, uptime, served models.
    For any engine, however started, and for rates over a window, use engine_status.

    Shows /v1/models, and for SGLang /get_server_info with the speculative accept length
    (an average over everything served since launch, not over a recent window), for vLLM
    the /metrics lines on running/waiting requests, KV cache use and speculative decoding
    (counters cumulative since launch). Ends with the log tail. Without server_id, lists
    the servers Sleuth started on the host.
    """
    host = ctx.host(args.host)
    if args.server_id is None:
        return _list_servers(host, ctx)
    status = ctl(
        host,
        "status",
        {"id": args.server_id, "paths_by_engine": STATUS_PATHS, "tail_lines": 20},
        Status,
    )
    # The log tail and the engine's pages may echo the server's secret environment values.
    pids = [status.record.pid, *(p.pid for p in status.processes)] if status.alive else []
    scrub = status_scrubber(host, pids, status.record.log)
    data = status_data(status)
    text, cut = cap_output(
        scrub(render_status(data)), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    shown = scrub.data(data.model_dump(mode="json"))
    return ToolResult(ok=True, output=text, data=shown, bytes_cut=cut)


def status_data(status: Status) -> ServerStatus:
    record, fetched = status.record, status.fetched
    ready_path = urlsplit(record.ready.url or "").path or "/"
    ready = (
        fetched[ready_path].status == 200 if record.ready.url and ready_path in fetched else None
    )
    models = fetched.get("/v1/models")
    info = _first_ok(fetched, "/get_server_info", "/server_info")
    page = fetched.get("/metrics")
    metrics = vllm_metrics(page.body) if page is not None and page.status == 200 else None
    return ServerStatus(
        server_id=record.id,
        engine=record.engine,
        port=record.port,
        pid=record.pid,
        alive=status.alive,
        exit_code=status.exit_code,
        processes=status.processes,
        uptime_s=round(
            _ended(record, status.alive, status.ended_at, status.now) - record.started_at, 1
        ),
        stopped=record.stopped_at is not None,
        stopped_at=_iso(record.stopped_at),
        ended_at=_iso(status.ended_at),
        log=record.log,
        tail=status.tail,
        ready=ready,
        models=None if models is None else _model_ids(models),
        server_info=None if info is None else sglang_spec_info(info),
        metrics=metrics,
    )


def _ended(record: ServerRecord, alive: bool, ended_at: float | None, now: float) -> float:
    """When the server stopped running: stop_server's time, else its process's exit, else
    now (still running), so a stopped server's uptime does not keep growing."""
    if alive:
        return now
    ends = [t for t in (record.stopped_at, ended_at) if t is not None]
    return min(ends) if ends else now


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def _first_ok(fetched: dict[str, HttpAnswer], *paths: str) -> dict[str, Any] | None:
    for path in paths:
        got = fetched.get(path)
        if got is not None and got.status == 200:
            try:
                body = json.loads(got.body)
            except json.JSONDecodeError:
                continue
            if isinstance(body, dict):
                return body
    return None


def _model_ids(models: HttpAnswer) -> list[str] | str:
    if models.status != 200:
        return f"HTTP {models.status or models.error}"
    try:
        body = json.loads(models.body)
        return [str(m.get("id")) for m in body.get("data", [])]
    except (json.JSONDecodeError, AttributeError):
        return "unreadable /v1/models answer"


def sglang_spec_info(info: dict[str, Any]) -> dict[str, Any]:
    """The parts of SGLang's server info that matter here; accept length is per DP rank."""
    states = [s for s in info.get("internal_states") or [] if isinstance(s, dict)]
    out = {k: info[k] for k in SGLANG_INFO_KEYS if k in info}
    for key in PER_RANK:
        out[key] = [x for x in (s.get(key) for s in states) if x is not None]
    return out


def vllm_metrics(text: str) -> VllmMetrics:
    """Filter /metrics to load, KV cache and spec-decode lines; derive the acceptance."""
    lines = [
        line
        for line in text.splitlines()
        if line.startswith(VLLM_METRIC_PREFIXES) and not line.startswith("#")
    ]
    try:
        samples = parse(text)
    except ToolError:
        samples = []
    drafts = total(samples, "vllm:spec_decode_num_drafts_total")
    accepted = total(samples, "vllm:spec_decode_num_accepted_tokens_total")
    drafted = total(samples, "vllm:spec_decode_num_draft_tokens_total")
    return VllmMetrics(
        lines=lines,
        mean_accept_length_since_launch=(
            round(1.0 + accepted / drafts, 3) if drafts and accepted is not None else None
        ),
        acceptance_rate_since_launch=(
            round(accepted / drafted, 3) if drafted and accepted is not None else None
        ),
    )


def _state(data: ServerStatus) -> str:
    if data.alive:
        state = "alive"
        if data.ready is not None:
            state += ", ready" if data.ready else ", NOT ready (health check failing)"
        return state + f"; up {data.uptime_s:.0f} s; {len(data.processes)} process(es)"
    if data.stopped:
        return (
            f"stopped by stop_server at {data.stopped_at} after {data.uptime_s:.0f} s "
            f"(exit code {data.exit_code})"
        )
    ended = f" at {data.ended_at}" if data.ended_at else ""
    return f"not running: exited{ended} with exit code {data.exit_code} after {data.uptime_s:.0f} s"


def render_status(data: ServerStatus) -> str:
    lines = [
        f"server {data.server_id} ({data.engine}, port {data.port}, pid {data.pid}): "
        + _state(data)
    ]
    if data.processes and not data.alive:
        lines.append(
            f"STILL ALIVE: {len(data.processes)} of its processes outlived it; stop_server ends "
            "them"
        )
    lines += [f"  pid {p.pid} (parent {p.ppid}): {shown_command(p.cmd)}" for p in data.processes]
    if data.models is not None:
        lines.append(f"/v1/models: {data.models}")
    if data.server_info is not None:
        lines += _render_sglang_info(data.server_info)
    if data.metrics is not None:
        lines.append("vLLM /metrics (counters are CUMULATIVE since launch):")
        lines += [f"  {line}" for line in data.metrics.lines] or ["  (no matching lines)"]
        if data.metrics.mean_accept_length_since_launch is not None:
            lines.append(
                f"mean accept length since launch: {data.metrics.mean_accept_length_since_launch}"
            )
    lines += [f"log {data.log}, last lines:", data.tail or "(log is empty)"]
    return "\n".join(lines)


def shown_command(cmd: str, width: int = 200) -> str:
    """A process's command line in a status line: redacted BEFORE it is cut (a URL's password
    cut short has lost the `@host` redaction knows it by), cut before the word it goes through."""
    shown = redact(cmd)
    return shown if len(shown) <= width else clean_cut(shown[:width]) + "[cut]"


def _render_sglang_info(info: dict[str, Any]) -> list[str]:
    lines = [
        "SGLang server info: " + json.dumps({k: v for k, v in info.items() if k not in PER_RANK})
    ]
    if info["avg_spec_accept_length"]:
        lines.append(
            f"speculative accept length (per DP rank): "
            f"{info['avg_spec_accept_length']} - CUMULATIVE since launch, not "
            f"this run; compare two readings to get one run's value"
        )
    if info["last_gen_throughput"]:
        lines.append(
            f"last generation throughput (tok/s, per DP rank): {info['last_gen_throughput']}"
        )
    return lines


def _list_servers(host: SandboxedHost, ctx: ToolContext) -> ToolResult:
    out = ctl(host, "list", {}, Listing)
    servers = [
        ServerSummary(
            server_id=item.record.id,
            engine=item.record.engine,
            port=item.record.port,
            alive=item.alive,
            exit_code=item.exit_code,
            uptime_s=round(
                _ended(item.record, item.alive, item.ended_at, out.now) - item.record.started_at, 1
            ),
            stopped=item.record.stopped_at is not None,
            started_at=_iso(item.record.started_at),
            stop_command=stop_command(host.name, item.record.id),
        )
        for item in out.servers
    ]
    lines = [
        f"{s.server_id}  {s.engine:7}  port {s.port}  "
        f"{'alive' if s.alive else 'not running'}  up {s.uptime_s:.0f} s"
        for s in servers
    ]
    if out.older:
        lines.append(older_not_shown(out.older, out.folder))
    lines += [ignored_line(item) for item in out.ignored]
    text = "\n".join(lines) or f"no servers started by Sleuth on host {host.name!r}"
    text, cut = cap_output(text, ctx.limits.max_output_bytes, ctx.limits.max_output_lines)
    return ToolResult(
        ok=True,
        output=text,
        data=ServerList(
            servers=servers, older_not_shown=out.older, folder=out.folder, ignored=out.ignored
        ).model_dump(mode="json"),
        bytes_cut=cut,
    )


def older_not_shown(count: int, folder: str) -> str:
    """The line that says a listing left out `count` older ended servers."""
    return f"... and {count:,} older ended servers not shown (records under {folder} on the host)"


def ignored_line(item: IgnoredRecord) -> str:
    """The line that names a record the listing would not read."""
    return f"IGNORED record {item.id}: {item.why}"
