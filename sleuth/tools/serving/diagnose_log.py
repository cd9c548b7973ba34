"""diagnose_log: why did this server fail, for any server's log, whoever started it.

Most failed servers were started by systemd, Kubernetes or a shell script, not by
launch_server: this tool reads the end of a log file on a host (inside its roots), the last
lines of a systemd unit's journal, or a container's or pod's own log, and diagnoses it like a
failed launch. It only reads.
"""

from __future__ import annotations

from pydantic import Field

from sleuth.tools.context import ToolContext
from sleuth.tools.registry import tool
from sleuth.tools.results import cap_output
from sleuth.tools.serving.diagnose import Diagnosis, diagnose, render
from sleuth.tools.serving.diagnose_facts import Engine
from sleuth.tools.serving.diagnose_lines import split_lines
from sleuth.tools.serving.log_source import LogSourceInput, read_log
from sleuth.transcripts.results import ToolResult


class DiagnoseLogInput(LogSourceInput):
    lines: int = Field(2000, ge=10, le=20000, description="How many last lines to read")
    engine: Engine | None = Field(
        None, description="vllm or sglang, to name its flags in the fix; guessed from the log"
    )


@tool()
def diagnose_log(ctx: ToolContext, args: DiagnoseLogInput) -> ToolResult:
    """Explain why an inference server (vLLM, SGLang) failed, at start or while serving.

    For servers started outside Sleuth (systemd, Kubernetes, a script): give `path`, a log
    file inside the host's roots (its last `lines` lines are read), `unit`, a systemd
    unit whose journal is read with journalctl, or, on a container or pod host,
    `container_log` (with `previous` for a pod's container before its last restart).
    Returns the failure `kind` (e.g. kv_cache_too_small, oom_weights, tp_divisibility,
    driver_mismatch; for a running server oom_serving, nccl_timeout, kv_exhaustion,
    no_progress, illegal_memory_access; no_failure, unknown), the `phase` it struck in
    (startup, warm-up, serving), its
    `confidence` (high: the log states it; low: the best reading), the `headline` (the log
    line that states the cause), evidence lines as logged, and a `fix` with the numbers the
    engine logged. Read-only.
    """
    host = ctx.host(args.host)
    source, text, argv = read_log(host, args, args.lines)
    lines = split_lines(text)[-args.lines :]
    found = diagnose(lines, engine=args.engine)
    return _result(ctx, source, len(lines), found, argv)


def _result(
    ctx: ToolContext, source: str, read: int, found: Diagnosis, argv: list[list[str]]
) -> ToolResult:
    head = f"{source}: last {read} lines read"
    text, cut = cap_output(
        "\n".join([head, *render(found)]),
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines,
    )
    data = {"source": source, "lines_read": read, "diagnosis": found.model_dump()}
    return ToolResult(ok=True, output=text, data=data, argv=argv, bytes_cut=cut)
