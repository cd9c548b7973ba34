"""The engines' own sizing rules, one small function each, with the engine line it mirrors.

A reader checks each function against the cited line. SGLang rules were read from the
sglang 0.5.23 wheel (PyPI); vLLM rules from vllm-project/vllm at the commit named in each
citation. On a host where the engine is installed, `capacity_plan` reads the installed
code for the rules it relies on and quotes those lines instead (source.py). The
quantisation floors are in quant_rules.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

SGLANG_VERSION = "sglang 0.5.23"
VLLM_VERSION = "vllm main@001cabc (kv_cache_interface.py), @00155cd (modelopt.py)"

Engine = Literal["sglang", "vllm"]


class Rule(BaseModel):
    """One engine rule: where it lives and the line that states it."""

    source: str
    quote: str


def sglang_rule(path: str, line: int, quote: str) -> Rule:
    return Rule(source=f"{SGLANG_VERSION} python/sglang/srt/{path}:{line}", quote=quote)


def vllm_rule(path: str, where: str, quote: str) -> Rule:
    return Rule(source=f"vllm {path} {where}", quote=quote)


SG_KV_HEADS = sglang_rule(
    "configs/model_config.py", 1711, "return max(1, total_num_kv_heads // kv_tensor_parallel_size)"
)
SG_MHA_CELL = sglang_rule(
    "model_executor/pool_configurator.py",
    495,
    "n * (model_config.head_dim + model_config.v_head_dim) * effective_num_layers * kv_size",
)
SG_MLA_CELL = sglang_rule(
    "model_executor/pool_configurator.py",
    379,
    "calculate_mla_kv_cache_dim(...) * effective_num_layers * kv_size "
    "(kv_lora_rank + qk_rope_head_dim, mem_cache/kv_cache_configurator.py:3419)",
)
SG_FP4_SCALES = sglang_rule(
    "model_executor/pool_configurator.py",
    390,
    "cell_size = (cell_size // 2) + ((kv_lora_rank + qk_rope_head_dim) // scale_block_size) "
    "* effective_num_layers * kv_size  (scale_block_size = 16)",
)
SG_HYBRID_LAYERS = sglang_rule(
    "model_executor/pool_configurator.py",
    235,
    "if mambaish := mambaish_config(kvc.model_config): "
    "num_layers = len([i for i in mambaish.full_attention_layer_ids ...])",
)
SG_MAMBA_SPLIT = sglang_rule(
    "arg_groups/fields/schedule.py",
    225,
    "mamba_full_memory_ratio: 'The ratio of mamba state memory to full kv cache memory.' "
    "fallback=0.9",
)
SG_SWA_CELL = sglang_rule(
    "model_executor/pool_configurator.py",
    799,
    "self._full_cell_bytes() + self._swa_full_tokens_ratio * self._swa_cell_bytes()",
)
SG_SWA_RATIO = sglang_rule(
    "arg_groups/fields/schedule.py", 160, "swa_full_tokens_ratio ... fallback=0.8"
)
SG_DRAFT_KV = sglang_rule(
    "model_executor/pool_configurator.py",
    311,
    "draft_kv_size = int(self._cell_size * draft_num_layers / int(num_layers))",
)
SG_POOL = sglang_rule(
    "mem_cache/kv_cache_configurator.py",
    3038,
    "rest_memory = available_gpu_memory - slack_gb - mm_reservation_gb  "
    "(slack_gb = pre_model_load_memory * (1 - mem_fraction_static), line 3007)",
)
SG_MEM_FRACTION = sglang_rule(
    "arg_groups/memory_hook.py",
    324,
    "mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)",
)
SG_RESERVED = sglang_rule(
    "arg_groups/memory_hook.py",
    309,
    "reserved_mem = 512; += activation_tokens * 1.5; += tp_size * pp_size / 8 * 1024; "
    "+= reserve_for_graph_mb; if gpu_mem > 60 * 1024: reserved_mem = max(reserved_mem, 10 * 1024)",
)
VL_PAGE = vllm_rule(
    "vllm/v1/kv_cache_interface.py",
    "FullAttentionSpec.real_page_size_bytes @001cabc",
    "self.block_size * self.num_kv_heads * (self.head_size + self.head_size_v) * "
    "get_dtype_size(self.dtype)",
)
VL_MLA_PAGE = vllm_rule(
    "vllm/v1/kv_cache_interface.py",
    "MLAAttentionSpec.real_page_size_bytes @001cabc",
    "self.block_size * self.num_kv_heads * self.head_size * get_dtype_size(self.dtype)",
)
VL_UTIL = vllm_rule(
    "vllm/config/cache.py",
    "CacheConfig.gpu_memory_utilization",
    "gpu_memory_utilization: float = 0.9  (fraction of GPU memory for weights, "
    "activations and KV cache; the KV cache gets what the profiled peak leaves)",
)
VL_KV_HEADS = vllm_rule(
    "vllm/config/model.py",
    "ModelConfig.get_num_kv_heads",
    "return max(1, total_num_kv_heads // parallel_config.tensor_parallel_size)",
)


# ---------------------------------------------------------------- KV cell


class KvShape(BaseModel):
    """What the KV cell depends on, read from config.json."""

    mla: bool
    kv_heads: int
    head_dim: int
    v_head_dim: int
    kv_lora_rank: int = 0
    """MLA: the width of the compressed KV latent each layer caches per token."""
    qk_rope_head_dim: int = 0
    """MLA: the rotary part of the key, cached beside the latent."""
    full_layers: int
    swa_layers: int = 0
    swa_kv_heads: int = 0
    """KV heads of the sliding-window layers, in SGLang's cell; 0: the same as `kv_heads`."""
    swa_head_dim: int = 0
    """Head size of the sliding-window layers, in SGLang's cell; 0: the same as `head_dim`."""


class KvCell(BaseModel):
    bytes_per_token: int
    """The engine's cell: bytes one token of KV takes on one GPU, all cached layers."""
    kv_heads_per_gpu: int
    formula: str
    rules: list[Rule]


def kv_heads_per_gpu(kv_heads: int, attn_tp: int) -> int:
    """Both engines: max(1, kv_heads // tp); fewer heads than GPUs means each GPU keeps one."""
    return max(1, kv_heads // attn_tp)


def sglang_kv_cell(
    s: KvShape, attn_tp: int, elem: int, fp4: bool = False, draft_layers: int = 0
) -> KvCell:
    """SGLang's per-token KV cell (DefaultPoolConfigurator / HybridSWAPoolConfigurator)."""
    n = kv_heads_per_gpu(s.kv_heads, attn_tp)
    layers = s.full_layers
    if s.mla:
        dim = s.kv_lora_rank + s.qk_rope_head_dim
        cell = dim * layers * elem
        formula = f"({s.kv_lora_rank} + {s.qk_rope_head_dim}) × {layers} layers × {elem} B"
        rules = [SG_MLA_CELL]
        if fp4:
            cell = cell // 2 + (dim // 16) * layers * elem
            formula += f" ÷ 2 + ({dim} ÷ 16) × {layers} × {elem} B of scales"
            rules.append(SG_FP4_SCALES)
        n = 1  # MLA's latent cache is one "head", not split by tp
    else:
        per_layer = n * (s.head_dim + s.v_head_dim)
        cell = per_layer * layers * elem
        formula = (
            f"max(1, {s.kv_heads} ÷ {attn_tp}) = {n} heads × ({s.head_dim} + {s.v_head_dim}) "
            f"× {layers} layers × {elem} B"
        )
        rules = [SG_KV_HEADS, SG_MHA_CELL]
        if fp4:
            cell = cell // 2 + (n * s.head_dim * layers * 2 * elem) // 16
            formula += f" ÷ 2 + {n}×{s.head_dim}×{layers}×2×{elem} ÷ 16 B of scales"
            rules.append(SG_FP4_SCALES)
    if s.swa_layers:
        swa_n = kv_heads_per_gpu(s.swa_kv_heads or s.kv_heads, attn_tp)
        swa = swa_n * 2 * (s.swa_head_dim or s.head_dim) * s.swa_layers * elem
        cell = int(cell + 0.8 * swa)
        formula += (
            f" + 0.8 × {swa_n}×2×{s.swa_head_dim or s.head_dim}×{s.swa_layers} SWA × {elem} B"
        )
        rules += [SG_SWA_CELL, SG_SWA_RATIO]
    if draft_layers and layers:
        cell += int(cell * draft_layers / layers)
        formula += f", + draft {draft_layers}/{layers} of it"
        rules.append(SG_DRAFT_KV)
    return KvCell(bytes_per_token=cell, kv_heads_per_gpu=n, formula=formula, rules=rules)


def vllm_kv_cell(s: KvShape, tp: int, elem: int, draft_layers: int = 0) -> KvCell:
    """vLLM's page size per token: K and V per head per layer (MLA: the latent, once)."""
    layers = s.full_layers + s.swa_layers + draft_layers
    if s.mla:
        dim = s.kv_lora_rank + s.qk_rope_head_dim
        cell = dim * layers * elem
        formula = f"({s.kv_lora_rank} + {s.qk_rope_head_dim}) × {layers} layers × {elem} B"
        return KvCell(
            bytes_per_token=cell, kv_heads_per_gpu=1, formula=formula, rules=[VL_MLA_PAGE]
        )
    n = kv_heads_per_gpu(s.kv_heads, tp)
    cell = n * (s.head_dim + s.v_head_dim) * layers * elem
    formula = (
        f"max(1, {s.kv_heads} ÷ {tp}) = {n} heads × ({s.head_dim} + {s.v_head_dim}) "
        f"× {layers} layers × {elem} B"
    )
    return KvCell(
        bytes_per_token=cell, kv_heads_per_gpu=n, formula=formula, rules=[VL_KV_HEADS, VL_PAGE]
    )


# ---------------------------------------------------------------- memory rule

GIB = 1 << 30
MIB = 1 << 20


class MemoryFraction(BaseModel):
    value: float
    default: bool
    detail: str
    rules: list[Rule]


def sglang_mem_fraction(gpu_mib: int, tp: int, pp: int, mla: bool) -> MemoryFraction:
    """SGLang's default --mem-fraction-static: capacity minus an activation/graph reserve."""
    chunked, max_bs = _sglang_capacity_defaults(gpu_mib, tp)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024 + max_bs * 2
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    value = round((gpu_mib - reserved) / gpu_mib, 3)
    detail = (
        f"SGLang default: round(({gpu_mib} - {reserved:.0f}) / {gpu_mib}, 3) = {value}, "
        f"reserving {reserved:.0f} MiB for chunked prefill {chunked}, decode graphs up to "
        f"batch {max_bs} and tp×pp={tp * pp}"
        + ("" if gpu_mib <= 60 * 1024 else " (at least 10240 MiB on a GPU over 60 GiB)")
    )
    return MemoryFraction(
        value=value, default=True, detail=detail, rules=[SG_MEM_FRACTION, SG_RESERVED]
    )


SG04_MEM_FRACTION = Rule(
    source="sglang 0.4.3.post4 python/sglang/srt/server_args.py ServerArgs.__post_init__",
    quote="if self.mem_fraction_static is None: if self.tp_size >= 16: 0.79 elif >= 8: 0.81 "
    "elif >= 4: 0.85 elif >= 2: 0.87 else: 0.88",
)


def sglang_04_mem_fraction(tp: int) -> MemoryFraction:
    """SGLang before 0.4.5: the default --mem-fraction-static by tensor-parallel size alone."""
    value = next(
        f for least, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88)) if tp >= least
    )
    detail = f"SGLang 0.4.x default at tp {tp}: {value} (the release's tensor-parallel table)"
    return MemoryFraction(value=value, default=True, detail=detail, rules=[SG04_MEM_FRACTION])


SG047_MEM_FRACTION = Rule(
    source="sglang 0.4.7.post1 to 0.5.2 python/sglang/srt/server_args.py ServerArgs.__post_init__",
    quote="reserved_mem = (2.8 + parallel_size / 10) * 1024 below 35 GiB; "
    "(9.5 + parallel_size / 2) * 1024 below 90 GiB; (12 + parallel_size / 2) * 1024 below "
    "160 GiB; else 32 * 1024; "
    "mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)",
)


def sglang_047_mem_fraction(gpu_mib: int, tp: int, pp: int) -> MemoryFraction:
    """SGLang 0.4.7.post1 to 0.5.2: a reserve by GPU size and tp x pp (without speculative
    decoding, +2 GiB, or DP attention, +4 GiB)."""
    size = tp * pp
    if gpu_mib < 35 * 1024:
        reserved = (2.8 + size / 10) * 1024
    elif gpu_mib < 90 * 1024:
        reserved = (9.5 + size / 2) * 1024
    elif gpu_mib < 160 * 1024:
        reserved = (12 + size / 2) * 1024
    else:
        reserved = 32 * 1024
    value = round((gpu_mib - reserved) / gpu_mib, 3)
    detail = (
        f"SGLang 0.4.7.post1-0.5.2 default: round(({gpu_mib} - {reserved:.0f}) / {gpu_mib}, 3) "
        f"= {value}, reserving {reserved:.0f} MiB by GPU size for tp x pp = {size}"
    )
    return MemoryFraction(value=value, default=True, detail=detail, rules=[SG047_MEM_FRACTION])


def sglang_default_fraction(
    rules_name: str, gpu_mib: int, tp: int, pp: int, mla: bool
) -> MemoryFraction:
    """SGLang's default --mem-fraction-static under the release's rule set."""
    if rules_name == "sglang-0.4":
        return sglang_04_mem_fraction(tp)
    if rules_name == "sglang-0.4.7":
        return sglang_047_mem_fraction(gpu_mib, tp, pp)
    return sglang_mem_fraction(gpu_mib, tp, pp, mla)


def _sglang_capacity_defaults(gpu_mib: int, tp: int) -> tuple[int, int]:
    """chunked_prefill_size and decode cuda-graph max batch per GPU size (memory_hook.py:89-166)."""
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 4096, 48 if tp < 4 else 160
    if gpu_mib < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mib < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def vllm_mem_fraction() -> MemoryFraction:
    return MemoryFraction(
        value=0.9,
        default=True,
        detail="vLLM default --gpu-memory-utilization 0.9 of the CUDA total; the profile's "
        "activation peak and non-torch memory come out of it (engine accounting below)",
        rules=[VL_UTIL],
    )


# ---------------------------------------------------------------- recurrent state


def gdn_state_bytes_per_request(
    linear_layers: int,
    tp: int,
    conv_kernel: int,
    key_heads: int,
    value_heads: int,
    key_dim: int,
    value_dim: int,
    conv_elem: int,
    ssm_elem: int = 4,
) -> int:
    """Gated-DeltaNet state of one request on one GPU: conv window + the recurrent matrix.

    conv: (kernel - 1) × (2·key_heads·key_dim + value_heads·value_dim) ÷ tp in the model
    dtype; temporal: value_heads ÷ tp × key_dim × value_dim in mamba_ssm_dtype (float32
    unless the config says otherwise), per linear-attention layer.
    """
    conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
    conv = (conv_kernel - 1) * (conv_dim // tp) * conv_elem
    temporal = max(1, value_heads // tp) * key_dim * value_dim * ssm_elem
    return linear_layers * (conv + temporal)


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str | None) -> tuple[int, bool]:
    """Element size in bytes of one KV value and whether it is fp4 (packed, with scales)."""
    if kv_cache_dtype == "auto":
        return (4 if str(model_dtype).lower() in ("float32", "fp32") else 2), False
    if kv_cache_dtype in ("bf16", "fp16"):
        return 2, False
    if kv_cache_dtype in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return 1, False
    return 1, True  # fp4: float4_e2m1fn_x2 is one byte per pair, halved by the rule


def kv_dtype_min_capability(kv_cache_dtype: str) -> int:
    """FP8 KV needs FP8 tensor cores (SM89+); FP4 KV the SM100 kernels; 16-bit runs anywhere."""
    if kv_cache_dtype.startswith("fp8"):
        return 89
    if kv_cache_dtype == "fp4":
        return 100
    return 0


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"
