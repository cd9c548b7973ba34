"""gpu_info: the host's NVIDIA GPUs from nvidia-smi, as a typed inventory.

`query_gpus` is the reading itself; capacity_plan calls it too and reads the inventory,
quoting a GPU as this tool prints it (`gpu_line`).
"""

from __future__ import annotations

from pydantic import BaseModel

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.transcripts.results import ToolResult

GPU_QUERY = "index,name,memory.total,memory.used,utilization.gpu,driver_version,compute_cap"
GPU_ARGV = ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"]


class GPU(BaseModel):
    index: int
    name: str
    """As nvidia-smi prints it, e.g. `NVIDIA H200`."""
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int | None
    driver: str
    compute_capability: str
    """The CUDA SM version, e.g. `9.0` (Hopper), `10.0` (Blackwell)."""


class GpuInventory(BaseModel):
    """gpu_info's data: the host's GPUs in nvidia-smi's order, or none and why."""

    gpus: list[GPU]
    reason: str | None = None
    """Why there is no GPU: nvidia-smi is missing or found none it could use."""


class GpuInfoInput(ToolInput):
    pass


@tool()
def gpu_info(ctx: ToolContext, args: GpuInfoInput) -> ToolResult:
    """List the host's NVIDIA GPUs: name, memory total and used, utilisation, driver and
    compute capability (9.0 is Hopper, 10.0 Blackwell), from nvidia-smi.

    A host without GPUs or without nvidia-smi is an answer ("no GPU"), not an error.
    """
    inventory, argv = query_gpus(ctx.host(args.host))
    data = inventory.model_dump(mode="json")
    if inventory.reason is not None:
        return ToolResult(
            ok=True,
            output=f"No GPU on host {args.host}: {inventory.reason}.\n",
            data=data,
            argv=[argv],
        )
    lines = [f"{len(inventory.gpus)} GPU(s) on {args.host}:"]
    lines += [gpu_line(g) for g in inventory.gpus]
    return ToolResult(ok=True, output="\n".join(lines) + "\n", data=data, argv=[argv], exit_code=0)


def query_gpus(sandbox: SandboxedHost) -> tuple[GpuInventory, list[str]]:
    """The host's GPUs and the command line that listed them.

    No nvidia-smi, or one that fails, is an inventory with a reason; a dropped connection
    is an error, since it says nothing about the GPUs.
    """
    try:
        run = sandbox.run(GPU_ARGV, timeout=30)
    except HostError as exc:
        if exc.kind is not ErrorKind.COMMAND_NOT_FOUND:
            raise
        return GpuInventory(gpus=[], reason="nvidia-smi is not installed"), GPU_ARGV
    if run.exit_code == 127:
        return GpuInventory(gpus=[], reason="nvidia-smi is not installed"), run.argv
    if run.exit_code != 0:
        detail = (run.stdout + run.stderr).decode(errors="replace").strip()
        reason = f"nvidia-smi found no usable GPU: {detail[:300]}"
        return GpuInventory(gpus=[], reason=reason), run.argv
    gpus = [_parse_gpu(line) for line in run.stdout.decode().splitlines() if line.strip()]
    return GpuInventory(gpus=gpus), run.argv


def gpu_line(g: GPU) -> str:
    """One GPU as gpu_info prints it: `GPU 0: NVIDIA H200, 0/143771 MiB used, ...`."""
    return (
        f"GPU {g.index}: {g.name}, {g.memory_used_mib}/{g.memory_total_mib} MiB used, "
        f"util {g.utilization_pct if g.utilization_pct is not None else '?'}%, "
        f"driver {g.driver}, compute capability {g.compute_capability}"
    )


def _parse_gpu(line: str) -> GPU:
    f = [part.strip() for part in line.split(",")]
    util = f[4] if f[4].isdigit() else None
    return GPU(
        index=int(f[0]),
        name=f[1],
        memory_total_mib=int(float(f[2])),
        memory_used_mib=int(float(f[3])),
        utilization_pct=int(util) if util else None,
        driver=f[5],
        compute_capability=f[6],
    )
