"""GPU facts for capacity planning: a small table of data-centre parts, and lenient names.

Memory is `memory.total` in MiB exactly as `nvidia-smi` prints it (what the engines size
their pools from, not the marketing GB); compute capability is the CUDA SM version the
engines compare quantisation methods against. A host's real `gpu_info` always wins over
this table: the table answers "what if" questions about GPUs that are not there.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from sleuth.tools.results import ToolError

NVIDIA_CC = "https://developer.nvidia.com/cuda-gpus (compute capability)"


class GpuSpec(BaseModel):
    key: str
    """The canonical name Sleuth uses, e.g. H100-SXM-80GB."""
    smi_name: str
    """The name `nvidia-smi --query-gpu=name` prints for this part."""
    memory_mib: int
    compute_capability: str
    source: str
    """Where the row's numbers come from."""

    @property
    def capability(self) -> int:
        """Compute capability as the engines compare it: 9.0 -> 90."""
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)


def _row(key: str, smi: str, mib: int, cc: str, where: str) -> GpuSpec:
    return GpuSpec(
        key=key,
        smi_name=smi,
        memory_mib=mib,
        compute_capability=cc,
        source=f"built-in GPU table row {key}: memory.total {mib} MiB from {where}; "
        f"compute capability {cc} from {NVIDIA_CC}",
    )


TABLE: tuple[GpuSpec, ...] = (
    _row("A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, "8.0", "nvidia-smi on A100-SXM4-40GB"),
    _row("A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, "8.0", "nvidia-smi on A100-SXM4-80GB"),
    _row("H100-SXM-80GB", "NVIDIA H100 80GB HBM3", 81559, "9.0", "nvidia-smi on H100 SXM5"),
    _row("H100-PCIE-80GB", "NVIDIA H100 PCIe", 81559, "9.0", "nvidia-smi on H100 PCIe"),
    _row("H100-NVL", "NVIDIA H100 NVL", 95830, "9.0", "nvidia-smi on H100 NVL"),
    _row("H800", "NVIDIA H800", 81559, "9.0", "nvidia-smi on H800 SXM"),
    _row("H200", "NVIDIA H200", 143771, "9.0", "nvidia-smi on H200 SXM (141 GB HBM3e)"),
    _row("H20", "NVIDIA H20", 97871, "9.0", "nvidia-smi on H20 (96 GB HBM3)"),
    _row("L40S", "NVIDIA L40S", 46068, "8.9", "nvidia-smi on L40S (48 GB GDDR6)"),
    _row("L20", "NVIDIA L20", 46068, "8.9", "nvidia-smi on L20 (48 GB GDDR6)"),
    _row("L4", "NVIDIA L4", 23034, "8.9", "nvidia-smi on L4 (24 GB GDDR6)"),
    _row("B200", "NVIDIA B200", 183359, "10.0", "nvidia-smi on B200 (180 GB HBM3e)"),
    _row("GB200", "NVIDIA GB200", 189471, "10.0", "nvidia-smi on GB200 NVL72 (186 GB HBM3e)"),
)


class GpuChoice(BaseModel):
    count: int | None
    """How many were asked for (`8xH200` -> 8), None when the text names no count."""
    spec: GpuSpec


_COUNT = re.compile(r"^\s*(\d+)\s*[x×*]\s*(.+?)\s*$", re.I)


def parse_gpus(text: str) -> GpuChoice:
    """`8xH200`, `4xB200`, `2xA100-80GB`, `H100`: count and table row, matched leniently.

    `H100`, `H100-SXM` and `H100-80GB` all name the SXM 80 GB part unless PCIe or NVL is
    said; `A100` alone is the 80 GB part; the NVIDIA prefix, case, spaces, dashes and
    underscores do not matter.
    """
    match = _COUNT.match(text)
    count, name = (int(match.group(1)), match.group(2)) if match else (None, text)
    if count is not None and count < 1:
        raise ToolError(f"gpus={text!r} asks for {count} GPUs; give at least one, e.g. 8xH200")
    spec = lookup(name)
    if spec is None:
        known = ", ".join(s.key for s in TABLE)
        raise ToolError(
            f"unknown GPU {name!r} in gpus={text!r}; known: {known}. Omit gpus to use the "
            "host's own GPUs (gpu_info), or name one of these, e.g. 8xH200"
        )
    return GpuChoice(count=count, spec=spec)


def _squash(name: str) -> str:
    low = re.sub(r"[\s_\-]+", "", name.lower())
    return low.removeprefix("nvidia")


def lookup(name: str) -> GpuSpec | None:
    """The table row a user's or nvidia-smi's GPU name means, or None."""
    s = _squash(name)
    for spec in TABLE:  # an exact nvidia-smi name or canonical key first
        if s in (_squash(spec.smi_name), _squash(spec.key)):
            return spec
    family = re.match(r"(gb200|b200|h200|h100|h800|h20|l40s|l20|l4|a100)", s)
    if family is None:
        return None
    rest = s[family.end() :]
    base = family.group(1)
    if base == "h100":
        if "pcie" in rest:
            return _by_key("H100-PCIE-80GB")
        if "nvl" in rest or "94gb" in rest or "96gb" in rest:
            return _by_key("H100-NVL")
        return _by_key("H100-SXM-80GB")
    if base == "a100":
        return _by_key("A100-40GB" if "40" in rest else "A100-80GB")
    if base == "l4" and rest[:1].isdigit():
        return None  # "L40" (no S) is a part this table lacks: no guess
    return _by_key(base.upper())


def _by_key(key: str) -> GpuSpec:
    return next(s for s in TABLE if s.key == key)
