"""What the MCP layer adds to a tool call, and whether concurrent MCP calls overlap.

    python -m benchmarks.mcp_calls [--calls 100] [--out benchmarks/results/mcp_calls.md]

Starts its own throwaway sshd (tests/sshd.py) and `sleuth mcp` over stdio (a subprocess,
driven by the official MCP client SDK), and times `read_lines` on the SSH host two ways,
interleaved call by call so both see the same machine: through `sleuth mcp` (JSON-RPC over
stdio, validation, policy, the transcript's fsync'd events) and through `agent.calls.execute`
on an SSHHost in this process (the same tool, no MCP). Then 8 concurrent MCP calls against
8 sequential ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from benchmarks import write_results
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.mcp_support import CLIENT, McpProject, mcp_server_pid
from tests.sshd import SSHServer, missing_reason

WARMUP = 10
ROUNDS = 20
"""Rounds of 8 sequential then 8 concurrent calls."""


def direct_context(server: SSHServer, work: Path, root: Path) -> ToolContext:
    host = SSHHost(
        "remote",
        server.alias,
        known_hosts=work / "direct_known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
    )
    config = HostConfig(ssh=server.alias, roots=[str(root)])
    return ToolContext(hosts={"remote": SandboxedHost("remote", host, config, Limits())})


async def measure(project: McpProject, ctx: ToolContext, calls: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    args = {"host": "remote", "path": "model.py", "start": 1, "end": 20}
    mcp_s: list[float] = []
    direct_s: list[float] = []
    async with Client(project.stdio(), client_info=CLIENT) as client:
        for i in range(WARMUP + calls):
            start = time.perf_counter()
            result = await client.call_tool("read_lines", args)
            mcp_took = time.perf_counter() - start
            assert not result.is_error, result
            start = time.perf_counter()
            direct = execute(ctx, "read_lines", args)
            direct_took = time.perf_counter() - start
            assert direct.ok, direct.error
            if i >= WARMUP:
                mcp_s.append(mcp_took)
                direct_s.append(direct_took)

        # The layer alone: a call refused before any host work (no `path`), both ways.
        bad = {"host": "remote"}
        layer_mcp, layer_direct = [], []
        server = mcp_server_pid()
        client_cpu = 0.0
        for i in range(WARMUP + calls):
            if i == WARMUP:
                server_cpu = cpu_seconds(server)
            start, cpu = time.perf_counter(), time.process_time()
            result = await client.call_tool("read_lines", bad)
            mcp_took = time.perf_counter() - start
            client_cpu += (time.process_time() - cpu) if i >= WARMUP else 0.0
            assert result.is_error, result
            start = time.perf_counter()
            assert not execute(ctx, "read_lines", bad).ok
            direct_took = time.perf_counter() - start
            if i >= WARMUP:
                layer_mcp.append(mcp_took)
                layer_direct.append(direct_took)

        server_cpu = cpu_seconds(server) - server_cpu

        async def one() -> None:
            await client.call_tool("read_lines", args)

        sequential, concurrent = [], []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            for _ in range(8):
                await one()
            sequential.append(time.perf_counter() - start)
            start = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(one)
            concurrent.append(time.perf_counter() - start)
    return {
        "load": load,
        "mcp": mcp_s,
        "direct": direct_s,
        "added": [m - d for m, d in zip(mcp_s, direct_s, strict=True)],
        "layer_mcp": layer_mcp,
        "layer_direct": layer_direct,
        "server_cpu_ms": server_cpu / calls * 1000,
        "client_cpu_ms": client_cpu / calls * 1000,
        "sequential": sequential,
        "concurrent": concurrent,
    }


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid`, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f}"


def p90(values: list[float]) -> str:
    return f"{statistics.quantiles(values, n=10)[8] * 1000:.2f}"


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' samples together; per-run medians of the added cost and loads kept apart."""
    got: dict[str, Any] = {key: [] for key, value in runs[0].items() if isinstance(value, list)}
    for run in runs:
        for key in got:
            got[key] += run[key]
    got["runs"] = [(statistics.median(r["added"]) * 1000, r["load"]) for r in runs]
    got["server_cpu_ms"] = statistics.median(r["server_cpu_ms"] for r in runs)
    got["client_cpu_ms"] = statistics.median(r["client_cpu_ms"] for r in runs)
    return got


def report(got: dict[str, Any], calls: int) -> str:
    added = statistics.median(got["added"]) * 1000
    alone = (statistics.median(got["layer_mcp"]) - statistics.median(got["layer_direct"])) * 1000
    speedup = statistics.median(got["sequential"]) / statistics.median(got["concurrent"])

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    per_run = "; ".join(f"{added:.2f} ms at load {load:.1f}" for added, load in got["runs"])
    layer_mcp = f"{ms(got['layer_mcp'])} | {p90(got['layer_mcp'])}"
    layer_direct = f"{ms(got['layer_direct'])} | {p90(got['layer_direct'])}"
    return f"""## MCP calls (`benchmarks/mcp_calls.py`)

Reproduce: `python -m benchmarks.mcp_calls --calls {calls} --runs {len(got["runs"])}` (starts
its own sshd on 127.0.0.1 and `sleuth mcp` over stdio).

{calls} sequential `read_lines` calls per run (20 lines of a 100-line file) on the SSH host, after
{WARMUP} warm-up calls, each MCP call followed by the same call through `agent.calls.execute` on
an SSHHost in the benchmark's own process, so both see the same moment of the machine. The
MCP path includes the client SDK, JSON-RPC over stdio, the server's worker thread and the
session transcript (one fsync'd `tool_executed` event per call, written by the session's
recorder thread while the reply goes out: fsync alone took 4-6 ms here under load, more than
the rest of the layer). {len(got["runs"])} runs, each a fresh `sleuth mcp` session; the
tables pool their calls. Per run, median added cost and load average (2 cores) at its start:
{per_run}.

| how | median ms/call | p90 ms/call |
| --- | ---: | ---: |
| `sleuth mcp` over stdio (official client SDK) | {ms(got["mcp"])} | {p90(got["mcp"])} |
| `agent.calls.execute` on SSHHost, no MCP | {ms(got["direct"])} | {p90(got["direct"])} |
| added by the MCP layer (per-call difference) | {ms(got["added"])} | {p90(got["added"])} |
| the layer alone: a call refused before host work, over MCP | {layer_mcp} |
| the same refusal through `agent.calls.execute` | {layer_direct} |

CPU time per refused call (median run): {got["server_cpu_ms"]:.2f} ms in the `sleuth mcp`
process (SDK and Sleuth), {got["client_cpu_ms"]:.2f} ms in the client SDK.

On a loaded machine the SSH call's own spread (p90 above) is far larger than the layer, so
the per-call difference of the `read_lines` rows can even come out negative; the last two
rows measure the layer with no host work at all, which is the steadier figure.

8 concurrent MCP calls against 8 sequential ones, {ROUNDS} rounds per run (median round):
{ms(got["sequential"])} ms sequential, {ms(got["concurrent"])} ms concurrent.

| target | measured | verdict |
| --- | ---: | ---: |
| median added cost of MCP ≤ 2 ms/call | {added:.2f} ms | {verdict(added <= 2.0)} |
| the same bound, the layer alone (a refused call) | {alone:.2f} ms | {verdict(alone <= 2.0)} |
| 8 concurrent ≥ 1.5x faster than 8 sequential | {speedup:.2f}x | {verdict(speedup >= 1.5)} |
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3, help="sessions, each a fresh sleuth mcp")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/mcp_calls.md"))
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        work = Path(tmp)
        with SSHServer.create(work / "sshd") as server:
            project = McpProject.create(work, server)
            (project.root / "model.py").write_text(
                "".join(f"line {i}: some source text\n" for i in range(1, 101))
            )
            ctx = direct_context(server, work, project.root)
            try:
                runs = [anyio.run(measure, project, ctx, args.calls) for _ in range(args.runs)]
            finally:
                ctx.close()
    text = report(pooled(runs), args.calls)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
