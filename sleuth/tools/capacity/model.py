"""What capacity planning reads from a checkpoint: the model's shape and its weights per GPU.

The shape comes from config.json (text_config first, as multimodal wrappers nest it); the
weights from the real tensor bytes in the shard headers, as checkpoint_summary collapsed
them into patterns, sharded the way the engines shard them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel

from sleuth.hosts.program.checkpoint_probe import DTYPE_BITS


class Evidence(BaseModel):
    source: str
    quote: str


class ModelShape(BaseModel):
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    mla: bool
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    full_layers: int
    linear_layers: int = 0
    swa_layers: int = 0
    sliding_window: int | None = None
    max_position_embeddings: int | None = None
    rope_scaling: dict[str, Any] | None = None
    experts: int | None = None
    moe_intermediate_size: int | None = None
    intermediate_size: int | None = None
    dtype: str | None = None
    linear: dict[str, int] = {}
    """Gated-DeltaNet sizes of hybrid linear-attention models (Qwen3-Next, Qwen3.5)."""
    evidence: dict[str, Evidence] = {}
    """Config key -> where it was read, for the reasons that rest on it."""


_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "attention_heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "v_head_dim": ("v_head_dim",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "hidden_size": ("hidden_size", "d_model"),
    "max_position_embeddings": ("max_position_embeddings", "max_sequence_length"),
    "rope_scaling": ("rope_scaling", "rope_parameters"),
    "experts": ("num_experts", "n_routed_experts", "num_local_experts"),
    "moe_intermediate_size": ("moe_intermediate_size",),
    "intermediate_size": ("intermediate_size",),
    "sliding_window": ("sliding_window",),
    "layer_types": ("layer_types",),
    "full_attention_interval": ("full_attention_interval",),
    "dtype": ("torch_dtype", "dtype"),
    "linear_num_key_heads": ("linear_num_key_heads",),
    "linear_num_value_heads": ("linear_num_value_heads",),
    "linear_key_head_dim": ("linear_key_head_dim",),
    "linear_value_head_dim": ("linear_value_head_dim",),
    "linear_conv_kernel_dim": ("linear_conv_kernel_dim",),
}


class ConfigError(Exception):
    """config.json lacks what capacity planning needs; the message names the key."""


def model_shape(config: dict[str, Any]) -> ModelShape:
    """The attention and layer shape from config.json, each value with its config key."""
    text = config.get("text_config")
    scopes = [("text_config.", text)] if isinstance(text, dict) else []
    scopes.append(("", config))
    found: dict[str, Any] = {}
    evidence: dict[str, Evidence] = {}
    for field, keys in _KEYS.items():
        for prefix, scope in scopes:
            key = next((k for k in keys if scope.get(k) is not None), None)
            if key is not None:
                found[field] = scope[key]
                evidence[field] = Evidence(
                    source=f"config.json {prefix}{key}", quote=_quote(key, scope[key])
                )
                break
    for need in ("layers", "attention_heads"):
        if not isinstance(found.get(need), int):
            raise ConfigError(f"config.json has no {_KEYS[need][0]}")
    layers, heads = found["layers"], found["attention_heads"]
    mla = isinstance(found.get("kv_lora_rank"), int)
    hidden = found.get("hidden_size")
    head_dim = found.get("head_dim") or (hidden // heads if isinstance(hidden, int) else 0)
    if mla:
        head_dim = found.get("qk_nope_head_dim", 0) + found.get("qk_rope_head_dim", 0)
    full, linear, swa = _layer_kinds(found, layers)
    lin = {
        k.removeprefix("linear_"): found[k]
        for k in _KEYS
        if k.startswith("linear_") and isinstance(found.get(k), int)
    }
    return ModelShape(
        layers=layers,
        attention_heads=heads,
        kv_heads=found.get("kv_heads") or heads,
        head_dim=head_dim,
        v_head_dim=found.get("v_head_dim") or head_dim,
        mla=mla,
        kv_lora_rank=found.get("kv_lora_rank") or 0,
        qk_rope_head_dim=found.get("qk_rope_head_dim") or 0,
        full_layers=full,
        linear_layers=linear,
        swa_layers=swa,
        sliding_window=found.get("sliding_window") if swa else None,
        max_position_embeddings=found.get("max_position_embeddings"),
        rope_scaling=found.get("rope_scaling")
        if isinstance(found.get("rope_scaling"), dict)
        else None,
        experts=found.get("experts"),
        moe_intermediate_size=found.get("moe_intermediate_size"),
        intermediate_size=found.get("intermediate_size"),
        dtype=str(found["dtype"]) if found.get("dtype") else None,
        linear=lin,
        evidence=evidence,
    )


def _layer_kinds(found: dict[str, Any], layers: int) -> tuple[int, int, int]:
    """(full, linear, sliding) attention layers: `layer_types`, else `full_attention_interval`."""
    types = found.get("layer_types")
    if isinstance(types, list) and types:
        kinds = [str(t) for t in types[:layers]]
        linear = sum(1 for t in kinds if "linear" in t or "mamba" in t)
        swa = sum(1 for t in kinds if "sliding" in t or "local" in t)
        return len(kinds) - linear - swa, linear, swa
    interval = found.get("full_attention_interval")
    if isinstance(interval, int) and interval > 1:
        full = layers // interval
        return full, layers - full, 0
    return layers, 0, 0


def _quote(key: str, value: Any) -> str:
    if isinstance(value, list) and len(value) > 6:
        shown = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value[:4])
        return f'"{key}": [{shown}, ...] ({len(value)} entries)'
    if isinstance(value, dict):
        inner = ", ".join(f'"{k}": {v!r}'.replace("'", '"') for k, v in value.items())
        return f'"{key}": {{{inner}}}'
    return f'"{key}": ' + (
        f'"{value}"'
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def max_context(shape: ModelShape) -> tuple[int | None, str]:
    """The longest context the config allows, and how it was derived (rope scaling included)."""
    base = shape.max_position_embeddings
    rope = shape.rope_scaling or {}
    factor = rope.get("factor")
    kind = str(rope.get("rope_type") or rope.get("type") or "")
    if isinstance(factor, (int, float)) and factor > 1 and kind in ("yarn", "dynamic", "linear"):
        original = rope.get("original_max_position_embeddings") or base
        if isinstance(original, int):
            scaled = int(original * factor)
            if base is None or scaled > base:
                return scaled, f"{original} × rope {kind} factor {factor} = {scaled}"
    if base is None:
        return None, "config.json declares no max_position_embeddings"
    return base, f"max_position_embeddings = {base}"


# ---------------------------------------------------------------- weights per GPU


class WeightShare(BaseModel):
    bytes_per_gpu: int
    total_bytes: int
    replicated_bytes: int
    """Bytes every GPU holds whole: norms, routers, scalar scales."""
    expert_bytes_per_gpu: int
    mtp_bytes_per_gpu: int
    """Included in bytes_per_gpu only when speculative decoding loads them."""
    evidence: list[Evidence]


_ROUTER = re.compile(r"(\.mlp\.gate\.|shared_expert_gate\.|\.router\.)")
_EXPERT = re.compile(r"\.experts\.")
_KV_PROJ = re.compile(r"\.(k_proj|v_proj)\.")
_MTP = re.compile(r"(^|\.)mtp(_layers)?\.")
_LAYER = re.compile(r"\.layers\.")


def weights_per_gpu(
    patterns: list[dict[str, Any]],
    *,
    tp: int,
    pp: int,
    ep: int,
    kv_heads: int,
    with_mtp: bool,
    deepseek_mtp_bytes: int = 0,
) -> WeightShare:
    """Each pattern's real bytes divided the way the engines shard it.

    Vocab-parallel embeddings, attention and dense MLP: ÷ tp. K/V projections: ÷ min(tp,
    kv_heads) (kv heads are replicated past that). Routed experts: ÷ max(tp, ep) (experts
    across ep, each split by tp ÷ ep). Norms, routers, 0-d scales: whole on every GPU.
    Layer weights ÷ pp (a stage's share); embeddings, head and final norm counted whole, a
    bound for the first and last stage; MTP only when loaded.
    """
    total = replicated = experts = mtp = 0
    layer_bytes = other = 0
    biggest: list[tuple[int, dict[str, Any]]] = []
    for p in patterns:
        name, shape = str(p["pattern"]), list(p["shape"])
        nbytes = p["count"] * math.prod(shape) * DTYPE_BITS.get(str(p["dtype"]), 16) // 8
        total += nbytes
        if len(shape) <= 1 or _ROUTER.search(name):
            share = nbytes
            replicated += nbytes
        elif _EXPERT.search(name) and "shared_expert" not in name:
            share = -(-nbytes // max(tp, ep))
            experts += share
        elif _KV_PROJ.search(name):
            share = -(-nbytes // min(tp, max(1, kv_heads)))
        else:
            share = -(-nbytes // tp)
        if _MTP.search(name):
            mtp += share
            continue
        if _LAYER.search(name):
            layer_bytes += share
        else:
            other += share
        biggest.append((nbytes, p))
    mtp += deepseek_mtp_bytes // tp
    layer_bytes -= deepseek_mtp_bytes // tp
    per_gpu = -(-layer_bytes // pp) + other + (mtp if with_mtp else 0)
    biggest.sort(key=lambda x: -x[0])
    evidence = [
        Evidence(
            source="safetensors headers (the weight map checkpoint_summary reports)",
            quote=pattern_line(p),
        )
        for _, p in biggest[:2]
    ]
    return WeightShare(
        bytes_per_gpu=per_gpu,
        total_bytes=total,
        replicated_bytes=replicated,
        expert_bytes_per_gpu=experts,
        mtp_bytes_per_gpu=mtp,
        evidence=evidence,
    )


def pattern_line(p: dict[str, Any]) -> str:
    """A weight-map pattern as checkpoint_summary prints it."""
    count = f" ×{p['count']}" if p["count"] > 1 else ""
    return f"{p['pattern']}{count} {p['dtype']}{list(p['shape'])}"
