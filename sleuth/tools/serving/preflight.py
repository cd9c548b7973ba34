"""preflight: would this launch fail? Checked in seconds, before any weight is loaded.

Takes launch_server's own input. Reads the engine's environment with the engine's own
interpreter, the GPUs, config.json and the shard headers, and checks what the engines check
at start-up: the engine and its entry point, the port, the launch's environment, GPU
compute capability against the dtype and the quantisation (the engine's rule quoted from
its installed source when the sandbox can read it, else the release the built-in rule
follows), the driver against torch's CUDA build, tensor parallel against heads, KV heads,
experts and quantisation blocks, every shard against the index and its header, the context
against the model's limit, the draft against the target, /dev/shm and disk. A failing check
is a diagnosis of the same kinds as a failed launch's; launch_server refuses a launch that
a high-confidence one says would fail.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, field_validator

from sleuth.tools.context import ToolContext
from sleuth.tools.environment.python_env import interpreter_name
from sleuth.tools.registry import tool
from sleuth.tools.results import cap_output
from sleuth.tools.serving.diagnose import Diagnosis, render
from sleuth.tools.serving.launch_input import EngineLaunch
from sleuth.tools.serving.preflight_checks import PreflightCheck, model_checks
from sleuth.tools.serving.preflight_facts import gather
from sleuth.tools.serving.preflight_host_checks import host_checks
from sleuth.transcripts.results import ToolResult


class PreflightReport(BaseModel):
    host: str
    engine: str
    seconds: float
    checks: list[PreflightCheck]
    blocked: bool
    """A high-confidence check failed: the launch would fail, so launch_server refuses it."""
    diagnosis: Diagnosis | None
    """The first failing check as a diagnosis (high confidence first)."""


class PreflightInput(EngineLaunch):
    """launch_server's engine options, checked without launching."""

    @field_validator("python")
    @classmethod
    def _named_like_python(cls, python: str | None) -> str | None:
        return interpreter_name(python)


def run_preflight(ctx: ToolContext, args: EngineLaunch) -> PreflightReport:
    """Every check for this launch; what could not be checked is `skip` with why."""
    start = time.monotonic()
    facts = gather(ctx, args)
    checks = [*host_checks(facts), *model_checks(facts)]
    failing = [c for c in checks if c.status == "fail"]
    failing.sort(key=lambda c: c.confidence != "high")
    return PreflightReport(
        host=args.host,
        engine=args.engine,
        seconds=round(time.monotonic() - start, 3),
        checks=checks,
        blocked=any(c.confidence == "high" for c in failing),
        diagnosis=as_diagnosis(failing[0]) if failing else None,
    )


def as_diagnosis(check: PreflightCheck) -> Diagnosis:
    evidence = [f"preflight {check.name}: {check.detail}"]
    if check.rule:
        evidence.append(f"rule: {check.rule}")
    return Diagnosis(
        kind=check.kind or "unknown",
        confidence=check.confidence,
        headline=f"preflight: {check.detail}",
        evidence=evidence,
        fix=check.fix or "",
    )


def render_report(report: PreflightReport) -> list[str]:
    mark = {"pass": "ok", "fail": "FAIL", "warn": "warn", "skip": "skip"}
    verdict = "would fail" if report.blocked else "no blocking problem found"
    lines = [f"preflight on {report.host} ({report.engine}): {verdict} in {report.seconds:.2f} s"]
    if report.diagnosis is not None:
        lines += render(report.diagnosis)
    for c in report.checks:
        low = " (low confidence)" if c.status == "fail" and c.confidence == "low" else ""
        lines.append(f"[{mark[c.status]}] {c.name}: {c.detail}{low}")
        if c.rule and c.status != "skip":
            lines.append(f"    rule: {c.rule}")
    return lines


@tool()
def preflight(ctx: ToolContext, args: PreflightInput) -> ToolResult:
    """Check, without launching, whether launch_server with these same inputs would fail.

    Takes launch_server's inputs (engine, model_path, port, tp, quantization, speculative,
    mem_fraction, extra_args such as --max-model-len or --dtype, env, python) and in a few
    seconds checks: the engine installed in that interpreter with its entry point, the port
    free, port variables in env, GPU count and compute capability against the dtype,
    quantisation and KV cache dtype (the engine's own rule quoted, file:line when its source
    is readable), the driver against torch's CUDA build, tensor parallel against attention
    and KV heads, experts and quantisation blocks, every shard present and as long as its
    header says, the context against the model's limit, the draft against the target, the
    weights against GPU memory, /dev/shm and disk. Each failing check has the kind a failed
    launch would get (tp_divisibility, gpu_capability, context_too_long, ...), a confidence,
    and a fix. Read-only; `blocked` true means launch_server would refuse this launch.
    """
    report = run_preflight(ctx, args)
    text, cut = cap_output(
        "\n".join(render_report(report)), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=text, data=report.model_dump(mode="json"), bytes_cut=cut)
