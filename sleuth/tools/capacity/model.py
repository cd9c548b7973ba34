"""What capacity planning reads from a model's config.json: its attention and layer shape.

text_config is read first, as multimodal wrappers nest it; each value keeps the config
key it came from, as evidence for the reasons that rest on it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from sleuth.tools.capacity.rules import KvShape


class Evidence(BaseModel):
    """Where a number came from (a config key, a header, an engine line) and what it says."""

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
    hidden_size: int = 0
    vocab_size: int = 0
    experts_per_token: int = 0
    rotary_dim: int = 0
    """Width of the rotary cos/sin cache the engines build (head_dim × partial factor)."""
    dtype: str | None = None
    linear: dict[str, int] = {}
    """Gated-DeltaNet sizes of hybrid linear-attention models (Qwen3-Next, Qwen3.5)."""
    evidence: dict[str, Evidence] = {}
    """Config key -> where it was read, for the reasons that rest on it."""

    def kv_shape(self, pp: int) -> KvShape:
        """What one pipeline stage's KV cell depends on: each stage caches only its own layers."""
        kv = self.model_dump(include=set(KvShape.model_fields))
        kv["full_layers"] = -(-self.full_layers // pp)
        kv["swa_layers"] = -(-self.swa_layers // pp)
        return KvShape.model_validate(kv)


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
    "experts_per_token": ("num_experts_per_tok", "moe_topk", "num_experts_per_token"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "partial_rotary_factor": ("partial_rotary_factor",),
    "sliding_window_pattern": ("sliding_window_pattern",),
    "model_type": ("model_type",),
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


class ModelConfigError(Exception):
    """A model's config.json lacks what capacity planning needs; the message names the key."""


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
            raise ModelConfigError(f"config.json has no {_KEYS[need][0]}")
    layers, heads = found["layers"], found["attention_heads"]
    mla = isinstance(found.get("kv_lora_rank"), int)
    hidden = found.get("hidden_size")
    head_dim = found.get("head_dim") or (hidden // heads if isinstance(hidden, int) else 0)
    if mla:
        head_dim = found.get("qk_nope_head_dim", 0) + found.get("qk_rope_head_dim", 0)
    full, linear, swa = _layer_kinds(found, layers)
    factor = found.get("partial_rotary_factor")
    rotary = int(head_dim * factor) if isinstance(factor, (int, float)) else head_dim
    if mla:
        rotary = found.get("qk_rope_head_dim") or 0
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
        hidden_size=hidden if isinstance(hidden, int) else 0,
        vocab_size=found.get("vocab_size") or 0,
        experts_per_token=found.get("experts_per_token") or 0,
        rotary_dim=rotary,
        dtype=str(found["dtype"]) if found.get("dtype") else None,
        linear=lin,
        evidence=evidence,
    )


def _layer_kinds(found: dict[str, Any], layers: int) -> tuple[int, int, int]:
    """(full, linear, sliding) attention layers: `layer_types`, else `full_attention_interval`,
    else `sliding_window_pattern` (every Nth layer global, Gemma 3), else Gemma 2's
    alternation (even layers sliding, as its modelling code has it)."""
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
    pattern = found.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1 and found.get("sliding_window"):
        full = layers // pattern
        return full, 0, layers - full
    if found.get("model_type") == "gemma2" and found.get("sliding_window"):
        return layers // 2, 0, layers - layers // 2
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
