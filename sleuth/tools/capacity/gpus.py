"""GPU facts for capacity planning: a small table of data-centre parts, and lenient names.

Two memory figures per part: `memory_mib` is `memory.total` as `nvidia-smi` prints it (what
SGLang's default memory fraction reads), and `cuda_mib` is the total CUDA reports
(`torch.cuda.mem_get_info()[1]`: nvidia-smi's total less its `memory.reserved`), which is what
vLLM multiplies by `--gpu-memory-utilization` and what both engines' free memory is measured
against. Each `cuda_mib` is quoted from an engine log or an out-of-memory message where one was
found, else nvidia-smi's total less 512 MiB (marked "estimated"). `sms` (streaming
multiprocessors) sizes vLLM's sampler buffer. Compute capability is the CUDA SM version the
engines compare quantisation methods against. A host's real `gpu_info` always wins over this
table: the table answers "what if" questions about GPUs that are not there.
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
    cuda_mib: int = 0
    """Total memory as CUDA reports it (the engines' "total"); 0: memory_mib less 512 MiB."""
    sms: int = 132
    """Streaming multiprocessors (vLLM's top-k/top-p sampler keeps one vocab row per SM)."""

    @property
    def engine_memory_mib(self) -> int:
        """What the engines see as this GPU's total memory."""
        return self.cuda_mib or self.memory_mib - 512

    @property
    def capability(self) -> int:
        """Compute capability as the engines compare it: 9.0 -> 90."""
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)


def _row(key: str, smi: str, mib: int, cc: str, where: str, cuda: str, sms: int) -> GpuSpec:
    """A table row; `cuda` is "MiB=evidence" for the CUDA-visible total, or "" to estimate it."""
    cuda_mib, _, cuda_where = cuda.partition("=")
    seen = int(cuda_mib) if cuda_mib else mib - 512
    told = cuda_where or "estimated as nvidia-smi's total less 512 MiB (no engine log found)"
    return GpuSpec(
        key=key,
        smi_name=smi,
        memory_mib=mib,
        compute_capability=cc,
        source=f"built-in GPU table row {key}: memory.total {mib} MiB from {where}; CUDA "
        f"total {seen} MiB ({told}); compute capability {cc} from {NVIDIA_CC}",
        cuda_mib=seen,
        sms=sms,
    )


_LLMD = "vLLM 0.19.0 log 'total_memory=79.19GiB' (llm-d-planner PR 205)"
TABLE: tuple[GpuSpec, ...] = (
    _row("A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, "8.0", "nvidia-smi on A100-SXM4-40GB",
         "40448=vLLM log 'total_gpu_memory (39.50GiB)' (vllm issue 12330)", 108),
    _row("A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, "8.0", "nvidia-smi on A100-SXM4-80GB",
         "", 108),
    _row("H100-SXM-80GB", "NVIDIA H100 80GB HBM3", 81559, "9.0", "nvidia-smi on H100 SXM5",
         f"81090={_LLMD}", 132),
    _row("H100-PCIE-80GB", "NVIDIA H100 PCIe", 81559, "9.0", "nvidia-smi on H100 PCIe",
         f"81090={_LLMD}, as the SXM part", 114),
    _row("H100-NVL", "NVIDIA H100 NVL", 95830, "9.0", "nvidia-smi on H100 NVL", "", 132),
    _row("H800", "NVIDIA H800", 81559, "9.0", "nvidia-smi on H800 SXM",
         f"81090={_LLMD}, as the H100 SXM", 132),
    _row("H200", "NVIDIA H200", 143771, "9.0", "nvidia-smi on H200 SXM (141 GB HBM3e)",
         "143157=torch.cuda.mem_get_info() on an H200 (150,109,880,320 B; nvidia-smi "
         "memory.reserved 616 MiB)", 132),
    _row("H20", "NVIDIA H20", 97871, "9.0", "nvidia-smi on H20 (96 GB HBM3)", "", 78),
    _row("L40S", "NVIDIA L40S", 46068, "8.9", "nvidia-smi on L40S (48 GB GDDR6)",
         "45466=PyTorch 'total capacity of 44.40 GiB' on an L40 (NVlabs/Eagle issue 68)", 142),
    _row("L40", "NVIDIA L40", 46068, "8.9", "nvidia-smi on L40 (48 GB GDDR6)",
         "45466=PyTorch 'total capacity of 44.40 GiB' (NVlabs/Eagle issue 68)", 142),
    _row("L20", "NVIDIA L20", 46068, "8.9", "nvidia-smi on L20 (48 GB GDDR6)", "", 92),
    _row("L4", "NVIDIA L4", 23034, "8.9", "nvidia-smi on L4 (24 GB GDDR6)", "", 58),
    _row("A10G", "NVIDIA A10G", 23028, "8.6", "nvidia-smi on A10G (24 GB GDDR6)", "", 80),
    _row("A10", "NVIDIA A10", 23028, "8.6", "nvidia-smi on A10 (24 GB GDDR6)", "", 72),
    _row("T4", "Tesla T4", 15360, "7.5", "nvidia-smi on Tesla T4 (16 GB GDDR6)", "", 40),
    _row("RTX-3090", "NVIDIA GeForce RTX 3090", 24576, "8.6", "nvidia-smi on RTX 3090",
         "24146=vLLM log 'total_gpu_memory=23.58GiB' (vllm issue 10517)", 82),
    _row("RTX-4090", "NVIDIA GeForce RTX 4090", 24564, "8.9", "nvidia-smi on RTX 4090",
         "24207=PyTorch 'total capacity of 23.64 GiB' (ali-vilab/VGen issue 104)", 128),
    _row("RTX-A6000", "NVIDIA RTX A6000", 49140, "8.6", "nvidia-smi on RTX A6000", "", 84),
    _row("B200", "NVIDIA B200", 183359, "10.0", "nvidia-smi on B200 (180 GB HBM3e)", "", 148),
    _row("GB200", "NVIDIA GB200", 189471, "10.0", "nvidia-smi on GB200 NVL72 (186 GB HBM3e)",
         "", 152),
)  # fmt: skip


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
    family = re.match(
        r"(gb200|b200|h200|h100|h800|h20|l40s|l40|l20|l4|a100|a10g|a10|t4|"
        r"(?:geforce)?rtx(?:a6000|3090|4090)|rtx?a6000|3090|4090)",
        s,
    )
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
    if base in ("l4", "a10", "t4") and rest[:1].isdigit():
        return None  # another part of the family (e.g. "L40" spelt otherwise): no guess
    if base.endswith(("3090", "4090")):
        return _by_key("RTX-" + base[-4:])
    if base.endswith("a6000"):
        return _by_key("RTX-A6000")
    return _by_key(base.upper())


def _by_key(key: str) -> GpuSpec:
    return next(s for s in TABLE if s.key == key)
