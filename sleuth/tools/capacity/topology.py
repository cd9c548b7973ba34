"""Where the engines run custom all-reduce: the tensor-parallel group's size, links and nodes.

vLLM's CustomAllreduce (vllm/distributed/device_communicators/custom_all_reduce.py, main
2026; SGLang's copy follows it) stays disabled when the group spans nodes ("Custom allreduce
is disabled because this process group spans across nodes"), when its size is not 2, 4, 6
or 8, and on more than two GPUs that are not fully NVLink-connected ("if world_size > 2 and
not fully_connected: ... not supported on more than two PCIe-only GPUs"). Where it runs it
allocates its IPC buffers: meta (meta_size + max_size), the input buffer (max_size, 8 MiB by
default) and rank_data (8 MiB).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from sleuth.tools.capacity.engine_setup import CommBuffers
from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.rules import MIB

Interconnect = Literal["auto", "nvlink", "pcie"]
SUPPORTED_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_BUFFERS = 3 * 8 * MIB
"""meta + input buffer (max_size = 8192 × 1024 each) + rank_data (8 MiB)."""
RULE = (
    "vllm vllm/distributed/device_communicators/custom_all_reduce.py CustomAllreduce.__init__: "
    "disabled if the group spans nodes, if world_size not in [2, 4, 6, 8], and "
    "'if world_size > 2 and not fully_connected' (more than two PCIe-only GPUs)"
)


class Topology(BaseModel):
    """The tensor-parallel group's links as the engine sees them."""

    nvlink: bool
    """Fully NVLink/XGMI-connected within a node."""
    nodes: int
    links_from: str
    """Where `nvlink` was read: the question's interconnect, or the GPU table row."""
    custom_all_reduce: bool
    why: str


def topology(
    tp: int, nodes: int, interconnect: Interconnect, gpu_nvlink: bool, gpu: str
) -> Topology:
    """Whether custom all-reduce runs for a tensor-parallel group of `tp` GPUs over `nodes`."""
    nvlink = gpu_nvlink if interconnect == "auto" else interconnect == "nvlink"
    links_from = (
        f"GPU table: {gpu} is {'fully NVLink-connected' if gpu_nvlink else 'PCIe-only'}"
        if interconnect == "auto"
        else f"given: interconnect={interconnect}"
    )
    if tp == 1:
        runs, why = False, "tp 1: no all-reduce"
    elif nodes > 1:
        runs, why = False, f"the tp group spans {nodes} nodes: custom all-reduce is off"
    elif tp not in SUPPORTED_WORLD_SIZES:
        runs, why = False, f"tp {tp} is not 2, 4, 6 or 8: custom all-reduce is off"
    elif tp > 2 and not nvlink:
        runs, why = False, f"{tp} PCIe-only GPUs (more than two): custom all-reduce is off"
    else:
        runs, why = (
            True,
            f"tp {tp} on {'NVLink' if nvlink else 'a PCIe pair'}: custom all-reduce runs",
        )
    return Topology(nvlink=nvlink, nodes=nodes, links_from=links_from, custom_all_reduce=runs,
                    why=why)  # fmt: skip


def comm_buffers(gpu: GpuSpec, links: Topology) -> CommBuffers:
    """Which collective buffers a tp group allocates, as far as the engines' logs tell them
    apart. One NVSwitch node of Hopper/Blackwell GPUs holds far more than any other NVIDIA
    group measured: vLLM 0.19.0 adds 1.85 GiB at tp 2-4 on H100 SXM, and SGLang 0.5.12 logs
    1.23 GB at distributed init at tp 8 on H200; vLLM 0.10.1.1, which counts all of NCCL,
    adds 0.12 GiB at tp 2 on A100 80GB. NCCL builds NVLink SHARP (NVLS) buffers only there
    (nccl-tests issue 228: "NVLS was a new feature of H100. A100 GPUs do not support it.");
    what the rest is, the sources read do not say. AMD GPUs use RCCL."""
    if gpu.rocm:
        return "rccl"
    hopper_or_blackwell = gpu.capability == 90 or 100 <= gpu.capability < 110
    return "nvswitch" if hopper_or_blackwell and links.nvlink and links.nodes == 1 else "nccl"
