"""A small, realistic demo deployment: two MoE checkpoints with real safetensors headers.

The shards are sparse: their headers and offsets are real and their data
sections are holes, so a "35B" checkpoint costs a few hundred kilobytes of disk.
One checkpoint carries its MTP heads; the other declares them in config.json
while its weights lack them (the trap a person misses).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}

Tensor = tuple[str, str, list[int]]


def write_sparse_shard(path: Path, tensors: list[Tensor], metadata: dict[str, str]) -> int:
    """Write a safetensors file whose header is real and whose data is a hole."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, dtype, shape in tensors:
        size = DTYPE_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + offset)
    return offset


def _nvfp4_linear(prefix: str, out_dim: int, in_dim: int) -> list[Tensor]:
    return [
        (f"{prefix}.weight", "U8", [out_dim, in_dim // 2]),
        (f"{prefix}.weight_scale", "F8_E4M3", [out_dim, in_dim // 16]),
        (f"{prefix}.weight_scale_2", "F32", []),
        (f"{prefix}.input_scale", "F32", []),
    ]


def _fp8_block_linear(prefix: str, out_dim: int, in_dim: int) -> list[Tensor]:
    return [
        (f"{prefix}.weight", "F8_E4M3", [out_dim, in_dim]),
        (f"{prefix}.weight_scale_inv", "F32", [-(-out_dim // 128), -(-in_dim // 128)]),
    ]


def _bf16_linear(prefix: str, out_dim: int, in_dim: int) -> list[Tensor]:
    return [(f"{prefix}.weight", "BF16", [out_dim, in_dim])]


def _layer(
    prefix: str, hidden: int, experts: int, moe_inter: int, expert_linear: Any = _bf16_linear
) -> list[Tensor]:
    tensors: list[Tensor] = [
        (f"{prefix}.input_layernorm.weight", "BF16", [hidden]),
        (f"{prefix}.post_attention_layernorm.weight", "BF16", [hidden]),
    ]
    for proj, out_dim in (
        ("q_proj", hidden),
        ("k_proj", hidden // 8),
        ("v_proj", hidden // 8),
        ("o_proj", hidden),
    ):
        tensors += _bf16_linear(f"{prefix}.self_attn.{proj}", out_dim, hidden)
    tensors.append((f"{prefix}.mlp.gate.weight", "BF16", [experts, hidden]))
    for e in range(experts):
        base = f"{prefix}.mlp.experts.{e}"
        tensors += expert_linear(f"{base}.gate_proj", moe_inter, hidden)
        tensors += expert_linear(f"{base}.up_proj", moe_inter, hidden)
        tensors += expert_linear(f"{base}.down_proj", hidden, moe_inter)
    return tensors


def _write_checkpoint(
    model_dir: Path,
    config: dict[str, Any],
    tensors: list[Tensor],
    shards: int,
    quant: dict[str, Any] | None,
) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    if quant is not None:
        (model_dir / "hf_quant_config.json").write_text(json.dumps(quant, indent=2))
    per_shard = -(-len(tensors) // shards)
    weight_map: dict[str, str] = {}
    total = 0
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        chunk = tensors[i * per_shard : (i + 1) * per_shard]
        total += write_sparse_shard(model_dir / name, chunk, {"format": "pt"})
        weight_map.update({t[0]: name for t in chunk})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))


HIDDEN, EXPERT_INTER = 2048, 512


def build_demo(root: Path) -> dict[str, Path]:
    """Build the demo deployment under `root`; returns the two model folders."""
    return {"with_mtp": _qwen_with_mtp(root), "mtp_stripped": _deepseek_mtp_stripped(root)}


def _qwen_with_mtp(root: Path) -> Path:
    """An NVFP4 Qwen3.5-MoE whose BF16 MTP layer survived the quantisation."""
    hidden, layers, experts, inter = HIDDEN, 40, 64, EXPERT_INTER
    qwen_dir = root / "models" / "Qwen3.5-MoE-demo-NVFP4"
    text_config = {
        "model_type": "qwen3_5_moe_text",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_experts": experts,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": inter,
        # q_proj is hidden wide and k/v an eighth of it (see _layer): 16 heads, 2 KV heads.
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": hidden // 16,
        "max_position_embeddings": 262144,
        "vocab_size": 151936,
        "layer_types": [
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
        ]
        * (layers // 4),
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
    }
    qwen_config = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": text_config,
        "quantization_config": {
            "quant_method": "modelopt",
            "quant_algo": "NVFP4",
            "group_size": 16,
            "ignore": ["lm_head", "mtp*", "*.mlp.gate"],
        },
    }
    tensors: list[Tensor] = [
        ("model.embed_tokens.weight", "BF16", [151936, hidden]),
        ("model.norm.weight", "BF16", [hidden]),
        ("lm_head.weight", "BF16", [151936, hidden]),
    ]
    for i in range(layers):
        tensors += _layer(f"model.layers.{i}", hidden, experts, inter, _nvfp4_linear)
    tensors += [
        ("mtp.fc.weight", "BF16", [hidden, 2 * hidden]),
        ("mtp.pre_fc_norm_embedding.weight", "BF16", [hidden]),
        ("mtp.pre_fc_norm_hidden.weight", "BF16", [hidden]),
        ("mtp.norm.weight", "BF16", [hidden]),
    ]
    tensors += _layer("mtp.layers.0", hidden, experts, inter)
    quant = {
        "producer": {"name": "modelopt", "version": "0.37.0"},
        "quantization": {
            "quant_algo": "NVFP4",
            "group_size": 16,
            "exclude_modules": ["lm_head", "mtp*", "*.mlp.gate"],
        },
    }
    _write_checkpoint(qwen_dir, qwen_config, tensors, shards=8, quant=quant)
    return qwen_dir


def _deepseek_mtp_stripped(root: Path) -> Path:
    """An FP8 DeepSeek-V3 whose config declares an MTP layer that the export dropped."""
    hidden, inter = HIDDEN, EXPERT_INTER
    ds_dir = root / "models" / "DeepSeek-V3-demo-FP8"
    ds_layers = 12
    ds_config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": hidden,
        "num_hidden_layers": ds_layers,
        "n_routed_experts": 32,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": inter,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": hidden // 16,
        "max_position_embeddings": 163840,
        "vocab_size": 129280,
        "num_nextn_predict_layers": 1,
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "weight_block_size": [128, 128],
            "activation_scheme": "dynamic",
        },
    }
    ds_tensors: list[Tensor] = [
        ("model.embed_tokens.weight", "BF16", [129280, hidden]),
        ("model.norm.weight", "BF16", [hidden]),
        ("lm_head.weight", "BF16", [129280, hidden]),
    ]
    for i in range(ds_layers):
        ds_tensors += _layer(f"model.layers.{i}", hidden, 32, inter, _fp8_block_linear)
    # The MTP layer (model.layers.12.{enorm,hnorm,eh_proj,...}) was stripped on export.
    _write_checkpoint(ds_dir, ds_config, ds_tensors, shards=4, quant=None)
    return ds_dir
