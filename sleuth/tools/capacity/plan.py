"""What capacity_plan takes and returns: its input, the plan, each reason with its evidence."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from sleuth.tools.capacity.accounting import KvAccount
from sleuth.tools.capacity.engine_setup import EngineVersion
from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.inverse_answer import InverseAnswer
from sleuth.tools.capacity.model import Evidence
from sleuth.tools.capacity.rules import Engine
from sleuth.tools.capacity.source import EngineSource
from sleuth.tools.capacity.topology import Interconnect, Topology
from sleuth.tools.registry import ToolInput

Verdict = Literal["fits", "does_not_fit", "incompatible"]
RELEASE = re.compile(r"v?\d+\.\d+(\.\d+)*(\.?(post|dev|rc|a|b)\d+)*(\+[0-9A-Za-z.]+)?")
"""A release as the engines print it: 0.19.0, 0.6.4.post1, 0.9.2.dev364+gb432b7a28."""


class CapacityInput(ToolInput):
    model_dir: str = Field(description="Checkpoint folder (config.json + safetensors).")
    gpus: str | None = Field(
        None,
        description="GPUs to plan for, e.g. 8xH200, 4xB200, 2xA100-80GB, 2xRTX-4090, L4; `cpu` "
        "for vLLM's CPU backend (with cpu_kv_space_gib); omit to use the host's own GPUs.",
    )
    gpu_memory_mib: int | None = Field(
        None,
        ge=1024,
        description="For a GPU the built-in table does not know: its memory.total in MiB "
        "(nvidia-smi or rocm-smi), with gpu_compute_capability.",
    )
    gpu_compute_capability: str | None = Field(
        None, description="For a GPU the table does not know: e.g. 8.6; AMD gfx942 is 9.4."
    )
    engine: Literal["sglang", "vllm"] = "sglang"
    tp: int = Field(1, ge=1, le=1024, description="Tensor-parallel size.")
    pp: int = Field(1, ge=1, le=1024, description="Pipeline-parallel size.")
    dp: int = Field(1, ge=1, le=1024, description="Data-parallel size (model replicas).")
    ep: int = Field(1, ge=1, le=1024, description="Expert-parallel size (MoE).")
    context_length: int | None = Field(
        None, ge=1, description="Tokens per request; default: the model's maximum."
    )
    kv_cache_dtype: Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp4"] = "auto"
    quantization: Literal["fp8"] | None = Field(
        None,
        description="The engine's `--quantization fp8` on an unquantised bf16/fp16 checkpoint: "
        "linear layers' weights stored as FP8 as they load (embeddings, lm_head, norms and "
        "routers keep the checkpoint's dtype). A checkpoint that declares its own quantization "
        "is not re-quantised: its method governs, or the engine refuses the mismatch.",
    )
    mem_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="SGLang --mem-fraction-static / vLLM --gpu-memory-utilization; "
        "default: the engine's own default for this GPU.",
    )
    speculative: Literal["none", "mtp", "nextn", "eagle"] = "none"
    engine_version: str | None = Field(
        None,
        description="Engine release whose accounting to follow, as the engine prints it, e.g. "
        "0.19.0, 0.6.4.post1 or 0.9.2.dev364+gb432b7a28; default: the one installed on the "
        "host, else the newest rules Sleuth knows.",
    )
    max_num_seqs: int | None = Field(
        None, ge=1, description="vLLM --max-num-seqs; default: the engine's for this GPU."
    )
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="vLLM --max-num-batched-tokens (the profile run's tokens)."
    )
    block_size: int | None = Field(None, ge=1, description="vLLM --block-size.")
    interconnect: Interconnect = Field(
        "auto",
        description="The GPUs' links: nvlink (fully NVLink/XGMI-connected), pcie, or auto (from "
        "the GPU model: SXM/HGX and MI300-class parts NVLink, workstation and L-series PCIe). "
        "Decides where the engines run custom all-reduce.",
    )
    nodes: int = Field(1, ge=1, le=1024, description="Nodes the tensor-parallel group spans.")
    enforce_eager: bool = Field(False, description="vLLM --enforce-eager: no CUDA graphs.")
    max_cudagraph_capture_size: int | None = Field(
        None,
        ge=1,
        description="vLLM --max-cudagraph-capture-size (the largest batch captured as a CUDA "
        "graph); default min(max_num_seqs × 2, 512). Fewer graphs reserve less (vLLM 0.21+).",
    )
    cpu_kv_space_gib: int = Field(
        4, ge=1, description="With gpus=cpu: VLLM_CPU_KVCACHE_SPACE, the KV cache's GiB."
    )
    find: Literal["plan", "min_gpus", "max_context"] = Field(
        "plan",
        description="plan: this layout; min_gpus: the fewest GPUs of the named type (tp × "
        "replicas) for `concurrency` requests of context_length tokens; max_context: the "
        "longest context at which `concurrency` requests fit at this tp.",
    )
    concurrency: int | None = Field(
        None, ge=1, description="Concurrent requests to serve (find=min_gpus or max_context)."
    )

    @field_validator("engine_version")
    @classmethod
    def _a_release(cls, value: str | None) -> str | None:
        if value is not None and not RELEASE.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a release number; give it as the engine prints it, e.g. "
                "0.19.0, 0.6.4.post1 or 0.9.2.dev364+gb432b7a28"
            )
        return value


class PlannedGpus(BaseModel):
    """The GPUs a plan is for: which part, how many, and where that was read."""

    spec: GpuSpec
    count: int
    evidence: Evidence
    source: str
    """`nvidia-smi on HOST`, or the `gpus` argument and whether the table or the host gave it."""


class Reason(BaseModel):
    check: str
    ok: bool
    detail: str
    evidence: list[Evidence]


class PoolTerms(BaseModel):
    gpu_memory_bytes: int
    mem_fraction: float
    mem_fraction_source: str
    static_budget_bytes: int
    weight_bytes: int
    recurrent_state_bytes: int
    kv_pool_bytes: int


class CapacityPlan(BaseModel):
    model_dir: str
    engine: Engine
    rules_from: str
    """`host source` when the installed engine's lines were read, else the built-in version."""
    engine_version: EngineVersion
    """The release whose accounting was applied and where it came from."""
    topology: Topology
    """The tp group's links and whether the engine runs custom all-reduce over them."""
    gpu: GpuSpec
    gpu_count: int
    gpus_from: str
    tp: int
    pp: int
    dp: int
    ep: int
    context_length: int
    kv_cache_dtype: str
    quantization: str | None = None
    """The engine's --quantization as given (fp8), whether or not it re-quantises."""
    speculative: str
    verdict: Verdict
    weight_bytes_per_gpu: int
    weight_bytes_total: int
    kv_bytes_per_token_per_gpu: int
    kv_formula: str
    recurrent_state_bytes_per_request_per_gpu: int
    max_kv_tokens: int
    max_concurrent_at_context: int
    max_context_single: int
    model_max_context: int | None
    pool: PoolTerms
    quant_method: str | None
    quant_min_capability: int | None
    reasons: list[Reason]
    engine_account: KvAccount
    """The engine's own accounting, step by step, and the lines it would print."""
    inverse: InverseAnswer | None = None
    """find=min_gpus or max_context: the answer, and the layout this plan is for."""
    engine_source: EngineSource | None
    checkpoint_via: str
    warnings: list[str]
