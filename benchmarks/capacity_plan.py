"""capacity_plan against checkpoint_summary on the 371k-tensor sparse MoE, in the same run.

`python -m benchmarks.capacity_plan` writes benchmarks/results/capacity_plan.md. The two
tools alternate call by call (so both see the same load on a shared machine), locally and
over loopback SSH with the host's python3. Target (issue 12): capacity_plan ≤ 1.2× the
time of checkpoint_summary, because it makes the same one pass over the headers (the
python_env probe and config.json read ride alongside it).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import write_results
from benchmarks.checkpoint_summary import ssh_context
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx
from tests.sshd import SSHServer

RESULTS = Path(__file__).parent / "results" / "capacity_plan.md"
RUNS = 7
TARGET = 1.2


def timed(ctx: ToolContext, host: str, tool: str, args: dict[str, Any]) -> float:
    start = time.perf_counter()
    result = execute(ctx, tool, {"host": host, **args})
    spent = time.perf_counter() - start
    assert result.ok, result.error
    return spent


def alternate(ctx: ToolContext, host: str, folder: Path) -> dict[str, Any]:
    summary_args = {"model_dir": str(folder)}
    plan_args = {**summary_args, "gpus": "8xH200", "tp": 8, "context_length": 131072}
    timed(ctx, host, "capacity_plan", plan_args)  # warm: imports, page cache, connection
    summary, plan = [], []
    for i in range(RUNS):  # alternate which goes first, so neither always follows the other
        order = [("s", summary_args), ("p", plan_args)][:: 1 if i % 2 == 0 else -1]
        for kind, args in order:
            tool = "checkpoint_summary" if kind == "s" else "capacity_plan"
            (summary if kind == "s" else plan).append(timed(ctx, host, tool, args))
    ratios = [p / s for p, s in zip(plan, summary, strict=True)]
    return {
        "summary": statistics.median(summary),
        "plan": statistics.median(plan),
        "ratio": statistics.median(plan) / statistics.median(summary),
        "pair": statistics.median(ratios),
    }


def measure(work: Path) -> list[tuple[str, dict[str, Any]]]:
    folder = work / "Qwen3.5-397B-A17B-NVFP4"
    fx.big_moe(folder)
    config = HostConfig(roots=[str(work)])
    local = ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})
    rows = [("local", alternate(local, "local", folder))]
    server = SSHServer.create(work / "sshd")
    try:
        ctx, host = ssh_context(
            server.ssh_config_path, work, folder, server.alias, server.known_hosts_path
        )
        host.stat("/")
        rows.append(("loopback SSH, host python3", alternate(ctx, "remote", folder)))
        host.close()
    finally:
        server.stop()
    return rows


def report(rows: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "## capacity_plan (issue 12)",
        "",
        "Reproduce: `python -m benchmarks.capacity_plan`.",
        "",
        f"The same sparse Qwen3.5-397B-A17B-like NVFP4 MoE as checkpoint_summary (370,976 "
        f"tensors, 50 shards), `capacity_plan gpus=8xH200 tp=8 context_length=131072` against "
        f"`checkpoint_summary`, alternating call by call, {RUNS} runs each after one warm-up, "
        f"medians; {os.cpu_count()}-core machine shared with other work (load average "
        f"{os.getloadavg()[0]:.1f} at the end). Target: capacity_plan ≤ {TARGET}× "
        "checkpoint_summary.",
        "",
        "| way | checkpoint_summary | capacity_plan | ratio of medians | median pair ratio "
        "| target |",
        "|---|---|---|---|---|---|",
    ]
    for way, r in rows:
        met = "met" if r["ratio"] <= TARGET else "missed"
        lines.append(
            f"| {way} | {r['summary']:.2f} s | {r['plan']:.2f} s | {r['ratio']:.2f}× "
            f"| {r['pair']:.2f}× | {met} |"
        )
    lines += [
        "",
        "capacity_plan runs the checkpoint probe once (the same program and pass as "
        "checkpoint_summary), with the python_env probe (to find an installed engine) and the "
        "config.json read running beside it in threads; the arithmetic over the collapsed "
        "weight map takes milliseconds.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = report(measure(Path(tmp)))
    write_results(RESULTS, text)


if __name__ == "__main__":
    main()
