"""GPU facts for capacity planning: a small table of data-centre parts, and lenient names.

Two memory figures per part: `memory_mib` is `memory.total` as `nvidia-smi` prints it (what
SGLang's default memory fraction reads), and `cuda_mib` is the total CUDA reports
(`torch.cuda.mem_get_info()[1]`: nvidia-smi's total less its `memory.reserved`), which is what
vLLM multiplies by `--gpu-memory-utilization` and what both engines' free memory is measured
against. Each `cuda_mib` is quoted from an engine log or an out-of-memory message where one was
found, else nvidia-smi's total less 512 MiB (marked "estimated"). `sms` (streaming
multiprocessors) sizes vLLM's sampler buffer. Compute capability is the CUDA SM version the
engines compare quantisation methods against. A host's real `gpu_info` always wins over this
table: the table answers "what if" questions about GPUs that are not there. The rows, with
where each figure was read, are data: gpus.toml beside this file.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources

from pydantic import BaseModel, ConfigDict

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
    nvlink: bool = False
    """A node of these parts is fully connected by NVLink (AMD: XGMI); False: PCIe-only."""

    @property
    def engine_memory_mib(self) -> int:
        """What the engines see as this GPU's total memory."""
        return self.cuda_mib or self.memory_mib - 512

    @property
    def rocm(self) -> bool:
        """An AMD part: the engines run their ROCm builds on it."""
        return self.smi_name.startswith("AMD")

    @property
    def capability(self) -> int:
        """Compute capability as the engines compare it: 9.0 -> 90."""
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)


class GpuRow(BaseModel):
    """One row of gpus.toml, as written there."""

    model_config = ConfigDict(extra="forbid")

    key: str
    smi_name: str
    memory_mib: int
    memory_from: str
    cuda_mib: int = 0
    cuda_evidence: str = ""
    compute_capability: str
    sms: int
    spec_url: str = ""
    nvlink: bool = False


def _spec(row: GpuRow) -> GpuSpec:
    seen = row.cuda_mib or row.memory_mib - 512
    told = row.cuda_evidence or "estimated as nvidia-smi's total less 512 MiB (no engine log found)"
    return GpuSpec(
        key=row.key,
        smi_name=row.smi_name,
        memory_mib=row.memory_mib,
        compute_capability=row.compute_capability,
        source=f"built-in GPU table row {row.key}: memory.total {row.memory_mib} MiB from "
        f"{row.memory_from}; CUDA total {seen} MiB ({told}); compute capability "
        f"{row.compute_capability} from {NVIDIA_CC}"
        + (f"; vendor specification {row.spec_url}" if row.spec_url else ""),
        cuda_mib=seen,
        sms=row.sms,
        nvlink=row.nvlink,
    )


def _table() -> tuple[GpuSpec, ...]:
    text = resources.files(__package__).joinpath("gpus.toml").read_text(encoding="utf-8")
    return tuple(_spec(GpuRow.model_validate(row)) for row in tomllib.loads(text)["gpu"])


TABLE = _table()


class GpuChoice(BaseModel):
    count: int | None
    """How many were asked for (`8xH200` -> 8), None when the text names no count."""
    spec: GpuSpec


_COUNT = re.compile(r"^\s*(\d+)\s*[x×*]\s*(.+?)\s*$", re.I)


def parse_gpus(
    text: str, memory_mib: int | None = None, capability: str | None = None
) -> GpuChoice:
    """`8xH200`, `4xB200`, `2xA100-80GB`, `H100`: count and table row, matched leniently.

    `H100`, `H100-SXM` and `H100-80GB` all name the SXM 80 GB part unless PCIe or NVL is
    said; `A100` alone is the 80 GB part; the NVIDIA prefix, case, spaces, dashes and
    underscores do not matter. A GPU the table does not know is planned from `memory_mib`
    (nvidia-smi's memory.total) and `capability` when both are given, else refused with
    what is missing.
    """
    match = _COUNT.match(text)
    count, name = (int(match.group(1)), match.group(2)) if match else (None, text)
    if count is not None and count < 1:
        raise ToolError(f"gpus={text!r} asks for {count} GPUs; give at least one, e.g. 8xH200")
    spec = lookup(name)
    if spec is None and memory_mib and capability:
        spec = _given(name, memory_mib, capability)
    if spec is None:
        known = ", ".join(s.key for s in TABLE)
        missing = " and ".join(
            what
            for what, have in (
                ("gpu_memory_mib (its nvidia-smi/rocm-smi memory.total in MiB)", memory_mib),
                ("gpu_compute_capability (e.g. 8.6; AMD gfx942 is 9.4)", capability),
            )
            if not have
        )
        raise ToolError(
            f"unknown GPU {name!r} in gpus={text!r}: the built-in table has no memory size or "
            f"compute capability for it. Give {missing} to plan for it as named, or name a "
            f"known GPU ({known}), e.g. 8xH200, or omit gpus to use the host's own GPUs "
            "(gpu_info)"
        )
    return GpuChoice(count=count, spec=spec)


def _given(name: str, memory_mib: int, capability: str) -> GpuSpec:
    """A GPU the table does not know, from the figures the question gave."""
    if not re.fullmatch(r"\d{1,2}\.\d", capability):
        raise ToolError(
            f"gpu_compute_capability={capability!r} is not MAJOR.MINOR; give e.g. 8.6 or 9.0"
        )
    return GpuSpec(
        key=name,
        smi_name=name,
        memory_mib=memory_mib,
        compute_capability=capability,
        source=f"given in the question: memory.total {memory_mib} MiB (CUDA total estimated "
        f"as {memory_mib - 512} MiB), compute capability {capability}; streaming "
        "multiprocessors assumed 132",
    )


def _squash(name: str) -> str:
    low = re.sub(r"[\s_\-]+", "", name.lower())
    return low.removeprefix("nvidia")


def lookup(name: str) -> GpuSpec | None:
    """The table row a user's or nvidia-smi's GPU name means, or None."""
    s = _squash(name)
    for spec in TABLE:  # an exact nvidia-smi name or canonical key first
        if s in (_squash(spec.smi_name), _squash(spec.key)):
            return spec
    alias = _ALIASES.get(s) or next((k for a, k in _PREFIXES if s.startswith(a)), None)
    if alias:
        return _by_key(alias)
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


_ALIASES = {"gh200144g": "GH200-144GB", "gh200144gb": "GH200-144GB"}
"""Squashed names that a prefix would send to the wrong row."""
_PREFIXES = (
    ("instinctmi300x", "MI300X"), ("amdinstinctmi300x", "MI300X"), ("mi300x", "MI300X"),
    ("instinctmi325x", "MI325X"), ("amdinstinctmi325x", "MI325X"), ("mi325x", "MI325X"),
    ("gh200", "GH200"), ("rtxa5000", "RTX-A5000"), ("a5000", "RTX-A5000"),
    ("rtxa4000", "RTX-A4000"), ("a4000", "RTX-A4000"), ("rtx6000ada", "RTX-6000-ADA"),
    ("6000ada", "RTX-6000-ADA"), ("rtx5000ada", "RTX-5000-ADA"), ("5000ada", "RTX-5000-ADA"),
    ("rtx4000ada", "RTX-4000-ADA"), ("4000ada", "RTX-4000-ADA"), ("a40", "A40"),
)  # fmt: skip
"""Workstation, Grace-Hopper and AMD parts by the start of their squashed name."""


def _by_key(key: str) -> GpuSpec:
    return next(s for s in TABLE if s.key == key)
