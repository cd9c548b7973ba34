"""diagnose_log: why did this server fail, for any server's log, whoever started it.

Most failed servers were started by systemd, Kubernetes or a shell script, not by
launch_server: this tool reads the end of a log file on a host (inside its roots), the last
lines of a systemd unit's journal, or a container's or pod's own log, and diagnoses it like a
failed launch. It only reads.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import cap_output
from sleuth.tools.serving.diagnose import Diagnosis, diagnose, render
from sleuth.tools.serving.diagnose_facts import Engine
from sleuth.tools.serving.diagnose_lines import split_lines
from sleuth.tools.serving.log_source import (
    UNIT_NAME,
    read_container_log,
    read_journal,
    read_log_file,
)
from sleuth.transcripts.results import ToolResult


class DiagnoseLogInput(ToolInput):
    path: str | None = Field(
        None, description="Log file on the host (inside its roots), e.g. /var/log/vllm.log"
    )
    unit: str | None = Field(
        None,
        description="systemd unit whose journal to read instead, e.g. vllm.service "
        "(needs journalctl on the host)",
    )
    container_log: bool = Field(
        False,
        description="Read the log of the host's container or pod instead (`docker|podman|"
        "nerdctl logs`, `kubectl logs`): the host must be a container or pod host",
    )
    previous: bool = Field(
        False,
        description="With container_log on a pod: the log of its container before the last "
        "restart (`kubectl logs --previous`), where a crash loop keeps its failure",
    )
    lines: int = Field(2000, ge=10, le=20000, description="How many last lines to read")
    engine: Engine | None = Field(
        None, description="vllm or sglang, to name its flags in the fix; guessed from the log"
    )

    @model_validator(mode="after")
    def _one_source(self) -> DiagnoseLogInput:
        if (self.path is not None) + (self.unit is not None) + self.container_log != 1:
            raise ValueError(
                "give exactly one of path (a log file), unit (a systemd unit) or "
                "container_log=true (the host's container or pod)"
            )
        if self.previous and not self.container_log:
            raise ValueError("previous reads a pod's earlier log: set container_log=true too")
        if self.unit is not None and (not UNIT_NAME.match(self.unit) or self.unit.startswith("-")):
            raise ValueError(f"unit {self.unit!r} is not a systemd unit name")
        return self


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
    if args.path is not None:
        source, text, argv = read_log_file(host, args.path)
    elif args.container_log:
        source, text, argv = read_container_log(host, args.lines, args.previous)
    else:
        source, text, argv = read_journal(host, args.unit or "", args.lines)
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
