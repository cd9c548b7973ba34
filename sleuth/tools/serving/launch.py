"""launch_server: start an inference server on a host and wait until it is ready or failed.

Preflight runs first: a launch its checks show would fail is refused with their diagnosis,
and nothing starts. The command line comes from `launch_input`, the wait from `readiness`;
a failed launch is explained by `diagnose` (kind, headline, evidence, fix) under
`data.diagnosis`, and its processes are stopped.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity.launch_check import KvCheck, check_launch
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.tools.serving.ctl import CtlRefused, LogText, ServerRecord, Started, ctl
from sleuth.tools.serving.data import LaunchData, Milestone, RefusedLaunch
from sleuth.tools.serving.diagnose import Diagnosis, diagnose, render
from sleuth.tools.serving.diagnose_lines import split_lines
from sleuth.tools.serving.engines import VllmEntry
from sleuth.tools.serving.env_scrub import Scrubber, launch_scrubber
from sleuth.tools.serving.launch_input import (
    LaunchServerInput,
    checked_env,
    command_line,
    planned_command_line,
    ready_spec,
)
from sleuth.tools.serving.preflight import PreflightReport, run_preflight
from sleuth.tools.serving.readiness import Watch, wait_ready
from sleuth.tools.serving.stop import stop_quietly
from sleuth.transcripts.results import ToolResult

MODULE_NOTE = (
    "entry point: python -m vllm.entrypoints.openai.api_server (the `vllm` console script "
    "is missing or cannot find the vllm distribution's metadata in this environment)"
)


@tool(mutating=True, argv=planned_command_line)
def launch_server(ctx: ToolContext, args: LaunchServerInput) -> ToolResult:
    """Start an inference server on a host and wait until it is ready or has failed.

    engine=sglang or vllm builds the command line from the typed options (tp, quantization
    such as modelopt_fp4, speculative NEXTN/EAGLE/EAGLE3 with num_steps/eagle_topk/
    num_draft_tokens, mem_fraction, extra_args); engine=command runs your argv and needs
    ready_url and/or ready_log_line. The server runs detached in its own process group,
    listening on the host's 127.0.0.1:port, with its log in a file on the host. Ready means:
    SGLang /health_generate answers 200 and its log says "The server is fired up and ready
    to roll!"; vLLM /health answers 200. The wait ends early when the process exits or the
    log shows a known failure (CUDA out of memory, CUDA graph capture failed, a traceback,
    ...); then, or on timeout, the process group is killed. Returns the server_id for
    server_status and stop_server, start-up milestones with their times, and the log tail
    on failure. Loading a large model can take many minutes; set timeout_s accordingly.
    """
    host = ctx.host(args.host)
    checked = run_preflight(ctx, args) if args.preflight else None
    argv, engine, entry = command_line(host, args)
    ready = ready_spec(args)
    env = checked_env(args.env)
    # A custom command's port is the one its ready_url names, when it names one.
    port = (urlsplit(ready.url).port if ready.url else None) or args.port
    if checked is not None and checked.blocked and checked.diagnosis is not None:
        return _refused(checked.diagnosis, argv, checked)
    if isinstance(entry, Diagnosis):
        return _refused(entry, argv, checked)
    server_id = new_server_id()
    start = {"id": server_id, "engine": engine, "argv": argv, "env": env, "port": port}
    try:
        started = ctl(host, "start", {**start, "ready": ready.model_dump()}, Started)
    except CtlRefused as exc:
        if exc.failure != "port_in_use":
            raise
        return _refused(_port_in_use(str(exc)), argv, checked)
    # Read now, while the server's process surely runs: its whole environment, not just env.
    scrub = launch_scrubber(host, started.record.pid, started.record.log, env)
    try:
        watch = wait_ready(
            host, server_id, engine, ready, args.timeout_s, args.poll_s, ctx.traceparent
        )
    except Exception as exc:
        stopped = stop_quietly(host, server_id)
        raise ToolError(
            scrub(f"lost track of server {server_id} while waiting for it ({exc}); {stopped}")
        ) from exc
    launched = Launched(
        host.name, server_id, engine, port, started.record, argv, env, entry, checked, scrub
    )
    kv_line = next((line for _, name, line in watch.milestones if name == "KV cache allocated"), "")
    check = (
        check_launch(host, engine, args.model_path or "", argv, env, kv_line) if kv_line else None
    )
    return _result(ctx, host, launched, watch, check)


def new_server_id() -> str:
    return f"srv-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Launched:
    """A server that started, as its launch result describes it."""

    host: str
    server_id: str
    engine: str
    port: int
    record: ServerRecord
    argv: list[str]
    env: dict[str, str]
    entry: VllmEntry | None
    preflight: PreflightReport | None
    scrub: Scrubber
    """Replaces the server's secret environment values (a server may log them); applied to
    the result's text and data as they leave."""


def _result(
    ctx: ToolContext,
    host: SandboxedHost,
    launched: Launched,
    watch: Watch,
    check: KvCheck | None = None,
) -> ToolResult:
    """Diagnose and stop a launch that is not ready, then report on it; a KV line the engine
    printed is set beside Sleuth's prediction for it (`kv_check`)."""
    diagnosis: Diagnosis | None = None
    stopped: str | None = None
    if watch.outcome in ("failed", "exited"):
        diagnosis = _cross_checked(_diagnose_log(host, launched, watch), launched.preflight)
    if watch.outcome != "ready":
        stopped = stop_quietly(host, launched.server_id, grace_s=5.0)
    launch_data = _launch_data(launched, watch, diagnosis, stopped)
    launch_data.kv_check = check
    data = launched.scrub.data(launch_data.model_dump(mode="json"))
    lines = _summary(launched, watch, diagnosis, stopped)
    if check is not None:
        lines.insert(len(lines) if stopped is None else len(lines) - 3, check.text())
    lines = [launched.scrub(line) for line in lines]
    text, cut = cap_output(
        "\n".join(lines), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    argv = [launched.argv]
    if watch.outcome == "ready":
        return ToolResult(ok=True, output=text, data=data, argv=argv, bytes_cut=cut)
    return ToolResult(ok=False, output=text, data=data, error=lines[0], argv=argv, bytes_cut=cut)


def _diagnose_log(host: SandboxedHost, launched: Launched, watch: Watch) -> Diagnosis:
    """Diagnose from the log's last 64 KB plus the start-up lines seen before them."""
    got = ctl(host, "log", {"id": launched.server_id, "bytes": 64 << 10}, LogText)
    lines = split_lines(got.text)
    if got.cut:
        lines = [line for _, _, line in watch.milestones] + lines[1:]
    return diagnose(lines, exit_code=watch.exit_code)


MEMORY_KINDS = ("oom_weights", "oom_activation", "kv_cache_too_small", "cuda_graph_capture")


def _cross_checked(diagnosis: Diagnosis, checked: PreflightReport | None) -> Diagnosis:
    """A memory failure's fix, with what the capacity rules said of the weights beforehand."""
    fit = next((c for c in checked.checks if c.name == "weights_fit"), None) if checked else None
    if diagnosis.kind not in MEMORY_KINDS or fit is None or fit.status == "skip":
        return diagnosis
    said = f"; the capacity rules gave, before the launch: {fit.detail}"
    return diagnosis.model_copy(update={"fix": diagnosis.fix + said})


def _refused(diagnosis: Diagnosis, argv: list[str], checked: PreflightReport | None) -> ToolResult:
    """A launch that never started: the same shape as a failed one, with its diagnosis."""
    lines = ["the server was not started: " + diagnosis.headline, *render(diagnosis)]
    lines += _preflight_failures(checked)
    data = RefusedLaunch(argv=argv, diagnosis=diagnosis, preflight=checked)
    return ToolResult(
        ok=False,
        output="\n".join(lines),
        error=lines[0],
        data=data.model_dump(mode="json"),
        argv=[argv],
    )


def _preflight_failures(checked: PreflightReport | None) -> list[str]:
    """Every failing preflight check, one line each (the launch's own or a refusal's)."""
    failing = [c for c in checked.checks if c.status in ("fail", "warn")] if checked else []
    if checked is None or not failing:
        return []
    return [
        f"preflight ({checked.seconds:.1f} s) found:",
        *(f"  {c.name} [{c.kind or c.status}, {c.confidence}]: {c.detail}" for c in failing),
    ]


def _port_in_use(message: str) -> Diagnosis:
    return Diagnosis(
        kind="port_in_use",
        headline=message,
        evidence=[message],
        fix="pick a free port, or stop the server that holds this one (server_status lists "
        "the servers Sleuth started)",
    )


def _launch_data(
    launched: Launched, watch: Watch, diagnosis: Diagnosis | None, stopped: str | None
) -> LaunchData:
    record = launched.record
    return LaunchData(
        server_id=launched.server_id,
        ready=watch.outcome == "ready",
        outcome=watch.outcome,
        engine=launched.engine,
        port=launched.port,
        pid=record.pid,
        pgid=record.pgid,
        argv=launched.argv,
        env_names=sorted(launched.env),
        log=record.log,
        elapsed_s=round(watch.elapsed_s, 2),
        milestones=[
            Milestone(t_s=round(t, 2), name=name, line=line) for t, name, line in watch.milestones
        ],
        failure_line=watch.failure,
        exit_code=watch.exit_code,
        host=launched.host,
        entry_point=launched.entry,
        diagnosis=diagnosis,
        stopped=stopped,
        preflight=launched.preflight,
    )


def _summary(
    launched: Launched, watch: Watch, diagnosis: Diagnosis | None, stopped: str | None
) -> list[str]:
    """The lines the model reads: the outcome (the cause, when diagnosed) first."""
    lines = _head(launched, watch)
    if launched.entry == "module":
        lines.insert(2, MODULE_NOTE)
    lines[2:2] = _preflight_failures(launched.preflight)
    if diagnosis is not None:
        # The first line (the error a terminal shows) states the cause, not the log's
        # first failure line, which is often "Traceback (most recent call last):".
        lines[0] = (
            f"server {launched.server_id} failed after {watch.elapsed_s:.1f} s "
            f"({diagnosis.kind}): {diagnosis.headline}"
        )
        lines[1:1] = render(diagnosis)
    if stopped is not None:
        lines.append(stopped)
        lines += ["log tail:", watch.tail or "(log is empty)"]
    return lines


def _head(launched: Launched, watch: Watch) -> list[str]:
    server_id, record = launched.server_id, launched.record
    took = f"{watch.elapsed_s:.1f} s"
    failure = watch.failure
    head = {
        "ready": f"server {server_id} is ready on 127.0.0.1:{launched.port} after {took}",
        "failed": f"server {server_id} failed after {took}: the log says {failure!r}",
        "exited": f"server {server_id} exited after {took} with exit code {watch.exit_code} "
        f"before it was ready",
        "timeout": f"server {server_id} was not ready after {took} (timeout); last health "
        f"check: {watch.http_status or watch.http_error or 'none'}",
    }[watch.outcome]
    lines = [
        head,
        f"pid {record.pid}, process group {record.pgid}",
        f"command: {shlex.join(launched.argv)}",
    ]
    if launched.env:
        # Names only: values may be secrets, and they reached the server on stdin.
        lines.append(
            "environment (names; values passed on stdin): " + ", ".join(sorted(launched.env))
        )
    lines.append(f"log: {record.log}")
    if watch.milestones:
        lines.append("start-up milestones (seconds after launch, to within one poll):")
        lines += [f"  +{t:7.1f} s  {name}: {line}" for t, name, line in watch.milestones]
    else:
        lines.append("start-up milestones: none seen in the log")
    return lines
