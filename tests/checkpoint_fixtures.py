"""Builders of real checkpoints: tiny ones with data, big ones as sparse files.

Every file here is in the real safetensors format (8-byte little-endian header
length, JSON header padded with spaces to 8 bytes, then data). Dtypes numpy
lacks (F8_E4M3, BF16) are written by `write_safetensors` by hand; plain ones
also go through the `safetensors` package itself.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from safetensors.numpy import save_file

from sleuth.hosts.program.checkpoint_probe import DTYPE_BITS

Spec = tuple[str, list[int]]
"""(dtype, shape) of one tensor."""


def nbytes(dtype: str, shape: list[int]) -> int:
    return math.prod(shape) * DTYPE_BITS[dtype] // 8


def header_bytes(tensors: dict[str, Spec], metadata: dict[str, str] | None = None) -> bytes:
    """The JSON header with contiguous offsets in insertion order, padded like safetensors."""
    doc: dict[str, Any] = {}
    if metadata is not None:
        doc["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = nbytes(dtype, shape)
        doc[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = orjson.dumps(doc)
    return raw + b" " * (-len(raw) % 8)


def write_safetensors(
    path: Path,
    tensors: dict[str, Spec],
    *,
    sparse: bool = False,
    metadata: dict[str, str] | None = None,
    seed: int = 0,
) -> int:
    """Write a real safetensors file (`sparse`: the data a hole). Returns the data bytes."""
    header = header_bytes(tensors, metadata)
    data = sum(nbytes(d, s) for d, s in tensors.values())
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        if sparse:
            fh.truncate(8 + len(header) + data)
        else:
            fh.write(np.random.default_rng(seed).integers(0, 256, data, np.uint8).tobytes())
    return data


def write_index(folder: Path, shards: dict[str, dict[str, Spec]], total: int | None = None) -> None:
    weight_map = {name: shard for shard, tensors in shards.items() for name in tensors}
    if total is None:
        total = sum(nbytes(d, s) for t in shards.values() for d, s in t.values())
    doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_bytes(
        orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    )


def write_sharded(
    folder: Path, tensors: dict[str, Spec], shard_bytes: int, *, sparse: bool = False
) -> dict[str, dict[str, Spec]]:
    """Split tensors in order into shards of about `shard_bytes`, write them and the index."""
    groups: list[dict[str, Spec]] = [{}]
    filled = 0
    for name, spec in tensors.items():
        size = nbytes(*spec)
        if filled and filled + size > shard_bytes:
            groups.append({})
            filled = 0
        groups[-1][name] = spec
        filled += size
    shards = {
        f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors": g for i, g in enumerate(groups)
    }
    for i, (name, group) in enumerate(shards.items()):
        write_safetensors(folder / name, group, sparse=sparse, metadata={"format": "pt"}, seed=i)
    write_index(folder, shards)
    return shards


def write_config(folder: Path, config: dict[str, Any], name: str = "config.json") -> None:
    (folder / name).write_text(json.dumps(config, indent=2))


# ---------------------------------------------------------------- tiny checkpoints


def tiny_qwen_mtp(folder: Path, *, with_mtp: bool = True) -> dict[str, np.ndarray]:
    """Qwen3-Next-style MoE with `mtp.*` heads, written with safetensors.numpy.save_file."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    h, e, inter = 16, 4, 8

    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float16)

    def layer(prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}.input_layernorm.weight": arr(h), f"{prefix}.mlp.gate.weight": arr(e, h)}
        for x in range(e):
            for proj, shape in (
                ("gate_proj", (inter, h)),
                ("up_proj", (inter, h)),
                ("down_proj", (h, inter)),
            ):
                out[f"{prefix}.mlp.experts.{x}.{proj}.weight"] = arr(*shape)
        return out

    first = {"model.embed_tokens.weight": arr(32, h), **layer("model.layers.0")}
    second = {**layer("model.layers.1"), "model.norm.weight": arr(h), "lm_head.weight": arr(32, h)}
    if with_mtp:
        second.update(
            {
                "mtp.fc.weight": arr(h, 2 * h),
                "mtp.norm.weight": arr(h),
                "mtp.pre_fc_norm_hidden.weight": arr(h),
                **layer("mtp.layers.0"),
            }
        )
    shards = {"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second}
    for name, tensors in shards.items():
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
    specs = {s: {n: ("F16", list(a.shape)) for n, a in t.items()} for s, t in shards.items()}
    write_index(folder, specs)
    write_config(folder, {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "num_hidden_layers": 2, "hidden_size": h, "num_experts": e, "num_experts_per_tok": 2,
        "moe_intermediate_size": inter, "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False, "torch_dtype": "float16",
        "layer_types": ["linear_attention", "full_attention"],
    })  # fmt: skip
    return {n: a for t in shards.values() for n, a in t.items()}


def deepseek_tensors(
    n_layers: int, h: int, e: int, inter: int, *, mtp_layers: int = 1
) -> dict[str, Spec]:
    """DeepSeek-V3-style FP8 block-wise tensors; MTP as extra layers at index >= n_layers."""
    out: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", [64, h])}
    for i in range(n_layers + mtp_layers):
        p = f"model.layers.{i}"
        if i >= n_layers:
            out.update(
                {
                    f"{p}.enorm.weight": ("BF16", [h]),
                    f"{p}.hnorm.weight": ("BF16", [h]),
                    f"{p}.eh_proj.weight": ("BF16", [h, 2 * h]),
                    f"{p}.shared_head.norm.weight": ("BF16", [h]),
                    f"{p}.shared_head.head.weight": ("BF16", [64, h]),
                }
            )
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        out[f"{p}.self_attn.q_proj.weight"] = ("F8_E4M3", [h, h])
        out[f"{p}.self_attn.q_proj.weight_scale_inv"] = (
            "F32",
            [max(1, h // 128), max(1, h // 128)],
        )
        out[f"{p}.mlp.gate.weight"] = ("BF16", [e, h])
        for x in range(e):
            for proj in ("gate_proj", "up_proj", "down_proj"):
                shape = [h, inter] if proj == "down_proj" else [inter, h]
                out[f"{p}.mlp.experts.{x}.{proj}.weight"] = ("F8_E4M3", shape)
                out[f"{p}.mlp.experts.{x}.{proj}.weight_scale_inv"] = ("F32", [1, 1])
    out["model.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [64, h])
    return out


def tiny_deepseek_mtp(folder: Path, *, mtp_layers: int = 1) -> dict[str, Spec]:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = deepseek_tensors(2, 32, 4, 16, mtp_layers=mtp_layers)
    write_sharded(folder, tensors, 6_000)
    write_config(folder, {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "num_hidden_layers": 2, "hidden_size": 32, "n_routed_experts": 4,
        "num_experts_per_tok": 2, "num_nextn_predict_layers": 1, "first_k_dense_replace": 0,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]},
    })  # fmt: skip
    return tensors


def nvfp4_linear(prefix: str, out_f: int, in_f: int) -> dict[str, Spec]:
    """ModelOpt NVFP4: U8 weight [out, in/2], F8_E4M3 per-16 scales, F32 scalar scales."""
    return {
        f"{prefix}.weight": ("U8", [out_f, in_f // 2]),
        f"{prefix}.weight_scale": ("F8_E4M3", [out_f, in_f // 16]),
        f"{prefix}.weight_scale_2": ("F32", []),
        f"{prefix}.input_scale": ("F32", []),
    }


NVFP4_HF_QUANT = {
    "producer": {"name": "modelopt", "version": "0.37.0"},
    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                     "exclude_modules": ["lm_head", "mtp*", "model.layers.0.mlp.gate"]},
}  # fmt: skip


def tiny_nvfp4(folder: Path) -> dict[str, Spec]:
    folder.mkdir(parents=True, exist_ok=True)
    h, inter, e = 64, 32, 2
    tensors: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", [128, h])}
    for i in range(2):
        tensors[f"model.layers.{i}.mlp.gate.weight"] = ("BF16", [e, h])
        for x in range(e):
            p = f"model.layers.{i}.mlp.experts.{x}"
            tensors.update(nvfp4_linear(f"{p}.gate_proj", inter, h))
            tensors.update(nvfp4_linear(f"{p}.up_proj", inter, h))
            tensors.update(nvfp4_linear(f"{p}.down_proj", h, inter))
    tensors["lm_head.weight"] = ("BF16", [128, h])
    write_safetensors(folder / "model.safetensors", tensors, metadata={"format": "pt"})
    write_config(folder, {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "num_hidden_layers": 2, "hidden_size": h, "num_experts": e, "num_experts_per_tok": 1,
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                "group_size": 16, "exclude_modules": ["lm_head"]},
    })  # fmt: skip
    write_config(folder, NVFP4_HF_QUANT, "hf_quant_config.json")
    return tensors


# ---------------------------------------------------------------- big sparse checkpoint

BIG = {"layers": 60, "experts": 512, "hidden": 4096, "moe_inter": 1024, "vocab": 248_320}


def big_moe_tensors(
    *, with_mtp: bool = True, layers: int = BIG["layers"], experts: int = BIG["experts"]
) -> dict[str, Spec]:
    """A Qwen3.5-397B-A17B-like NVFP4 MoE: hybrid attention, 512 experts, `mtp.*` in BF16."""
    h, inter, vocab = BIG["hidden"], BIG["moe_inter"], BIG["vocab"]
    lm = "model.language_model"
    out: dict[str, Spec] = {f"{lm}.embed_tokens.weight": ("BF16", [vocab, h])}

    def moe(p: str, quantized: bool) -> None:
        out[f"{p}.mlp.gate.weight"] = ("BF16", [experts, h])
        for proj in ("gate_proj", "up_proj", "down_proj"):
            out[f"{p}.mlp.shared_expert.{proj}.weight"] = (
                "BF16",
                [h, inter] if proj == "down_proj" else [inter, h],
            )
        out[f"{p}.mlp.shared_expert_gate.weight"] = ("BF16", [1, h])
        for x in range(experts):
            for proj in ("gate_proj", "up_proj", "down_proj"):
                o, i = (h, inter) if proj == "down_proj" else (inter, h)
                name = f"{p}.mlp.experts.{x}.{proj}"
                if quantized:
                    out.update(nvfp4_linear(name, o, i))
                else:
                    out[f"{name}.weight"] = ("BF16", [o, i])

    def attention(p: str, full: bool) -> None:
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        out[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
        if full:
            for proj, shape in (
                ("q_proj", [16384, h]),
                ("k_proj", [512, h]),
                ("v_proj", [512, h]),
                ("o_proj", [h, 8192]),
            ):
                out[f"{p}.self_attn.{proj}.weight"] = ("BF16", shape)
            out[f"{p}.self_attn.q_norm.weight"] = ("BF16", [256])
            out[f"{p}.self_attn.k_norm.weight"] = ("BF16", [256])
        else:
            for proj, shape in (
                ("in_proj_qkvz", [12288, h]),
                ("in_proj_ba", [64, h]),
                ("out_proj", [h, 4096]),
            ):
                out[f"{p}.linear_attn.{proj}.weight"] = ("BF16", shape)
            out[f"{p}.linear_attn.conv1d.weight"] = ("BF16", [8192, 1, 4])
            out[f"{p}.linear_attn.A_log"] = ("F32", [32])
            out[f"{p}.linear_attn.dt_bias"] = ("BF16", [32])

    for i in range(layers):
        attention(f"{lm}.layers.{i}", full=i % 4 == 3)
        moe(f"{lm}.layers.{i}", quantized=True)
    out[f"{lm}.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [vocab, h])
    if with_mtp:
        out["mtp.fc.weight"] = ("BF16", [h, 2 * h])
        for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            out[f"mtp.{norm}.weight"] = ("BF16", [h])
        attention("mtp.layers.0", full=True)
        moe("mtp.layers.0", quantized=False)
    return out


def big_moe_config(layers: int = BIG["layers"], experts: int = BIG["experts"]) -> dict[str, Any]:
    text = {
        "model_type": "qwen3_5_moe_text", "num_hidden_layers": layers,
        "hidden_size": BIG["hidden"], "num_experts": experts, "num_experts_per_tok": 10,
        "moe_intermediate_size": BIG["moe_inter"], "vocab_size": BIG["vocab"],
        "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                        "full_attention"] * (layers // 4),
        "full_attention_interval": 4, "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        # Qwen3.5-397B-A17B's attention: 32 query heads, 2 KV heads of 256 (gated, so
        # q_proj is 2 × 32 × 256), Gated-DeltaNet linear attention in the other layers.
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256,
        "max_position_embeddings": 262_144, "torch_dtype": "bfloat16",
        "linear_num_key_heads": 16, "linear_num_value_heads": 64, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    }  # fmt: skip
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
        "text_config": text,
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                "group_size": 16, "producer": {"name": "modelopt"},
                                "exclude_modules": ["lm_head", "mtp*", "*.mlp.gate",
                                                    "*.shared_expert_gate"]},
    }  # fmt: skip


def big_moe(
    folder: Path, *, with_mtp: bool = True, shard_bytes: int = 5_000_000_000, **sizes: int
) -> dict[str, dict[str, Spec]]:
    """Write the big checkpoint as sparse shards (real headers, data a hole), index, configs."""
    folder.mkdir(parents=True, exist_ok=True)
    shards = write_sharded(
        folder, big_moe_tensors(with_mtp=with_mtp, **sizes), shard_bytes, sparse=True
    )
    write_config(folder, big_moe_config(**sizes))
    write_config(folder, NVFP4_HF_QUANT, "hf_quant_config.json")
    return shards


def logical_params(tensors: Iterable[Spec], packed_u8: bool = True) -> int:
    """Independent count of logical parameters for checks: U8 weights hold 2 FP4 values."""
    return sum(math.prod(s) * (2 if packed_u8 and d == "U8" else 1) for d, s in tensors)


def corrupt(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


# ---------------------------------------------------------------- real model shapes (capacity)
#
# Configs of public models with every tensor their checkpoints hold (names, dtypes, shapes),
# written as sparse shards: real headers, the data a hole. Sizes from the models' own
# config.json on the Hugging Face Hub.


def fp8_block(prefix: str, out_f: int, in_f: int) -> dict[str, Spec]:
    """DeepSeek-style FP8 with 128×128 block scales."""
    return {
        f"{prefix}.weight": ("F8_E4M3", [out_f, in_f]),
        f"{prefix}.weight_scale_inv": ("F32", [-(-out_f // 128), -(-in_f // 128)]),
    }


DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}  # fmt: skip


def deepseek_v3_tensors(experts: int = 256) -> dict[str, Spec]:
    """DeepSeek-V3's tensors: MLA attention, 3 dense layers, MoE, one MTP layer (layer 61)."""
    c = DEEPSEEK_V3
    h, heads, vocab = c["hidden_size"], c["num_attention_heads"], c["vocab_size"]
    out: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", [vocab, h])}
    for i in range(c["num_hidden_layers"] + 1):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        out[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
        a = f"{p}.self_attn"
        out.update(fp8_block(f"{a}.q_a_proj", 1536, h))
        out[f"{a}.q_a_layernorm.weight"] = ("BF16", [1536])
        out.update(fp8_block(f"{a}.q_b_proj", heads * 192, 1536))
        out.update(fp8_block(f"{a}.kv_a_proj_with_mqa", 512 + 64, h))
        out[f"{a}.kv_a_layernorm.weight"] = ("BF16", [512])
        out.update(fp8_block(f"{a}.kv_b_proj", heads * 256, 512))
        out.update(fp8_block(f"{a}.o_proj", h, heads * 128))
        if i < c["first_k_dense_replace"]:
            inter = c["intermediate_size"]
            out.update(fp8_block(f"{p}.mlp.gate_proj", inter, h))
            out.update(fp8_block(f"{p}.mlp.up_proj", inter, h))
            out.update(fp8_block(f"{p}.mlp.down_proj", h, inter))
        else:
            inter = c["moe_intermediate_size"]
            out[f"{p}.mlp.gate.weight"] = ("BF16", [experts, h])
            out[f"{p}.mlp.gate.e_score_correction_bias"] = ("F32", [experts])
            for e in [*(f"experts.{x}" for x in range(experts)), "shared_experts"]:
                out.update(fp8_block(f"{p}.mlp.{e}.gate_proj", inter, h))
                out.update(fp8_block(f"{p}.mlp.{e}.up_proj", inter, h))
                out.update(fp8_block(f"{p}.mlp.{e}.down_proj", h, inter))
        if i == c["num_hidden_layers"]:  # the MTP layer's extra parts
            out[f"{p}.enorm.weight"] = ("BF16", [h])
            out[f"{p}.hnorm.weight"] = ("BF16", [h])
            out[f"{p}.eh_proj.weight"] = ("BF16", [h, 2 * h])
            out[f"{p}.shared_head.norm.weight"] = ("BF16", [h])
            out[f"{p}.shared_head.head.weight"] = ("BF16", [vocab, h])
    out["model.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [vocab, h])
    return out


LLAMA3_70B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
    "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
    "rope_theta": 500000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip


def llama3_70b_tensors(fp8: bool = False) -> dict[str, Spec]:
    """Meta-Llama-3-70B's tensors; `fp8`: as NVIDIA's ModelOpt FP8 export (per-tensor scales)."""
    c = LLAMA3_70B
    h, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * 128

    def linear(name: str, out_f: int, in_f: int) -> dict[str, Spec]:
        if not fp8:
            return {f"{name}.weight": ("BF16", [out_f, in_f])}
        scales = {f"{name}.weight_scale": ("F32", []), f"{name}.input_scale": ("F32", [])}
        return {f"{name}.weight": ("F8_E4M3", [out_f, in_f]), **scales}

    out: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", [vocab, h])}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        for proj, o, n in (
            ("q_proj", h, h),
            ("k_proj", kv, h),
            ("v_proj", kv, h),
            ("o_proj", h, h),
        ):
            out.update(linear(f"{p}.self_attn.{proj}", o, n))
        for proj, o, n in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
            out.update(linear(f"{p}.mlp.{proj}", o, n))
        out[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
    out["model.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [vocab, h])
    return out


GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
    "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
    "num_experts_per_tok": 4, "sliding_window": 128, "vocab_size": 201088,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False},
}  # fmt: skip


def gpt_oss_20b_tensors() -> dict[str, Spec]:
    """gpt-oss-20b in BF16 (as unsloth/gpt-oss-20b-BF16): fused expert tensors, sinks."""
    c = GPT_OSS_20B
    h, e, vocab = c["hidden_size"], c["num_local_experts"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * 64, c["num_key_value_heads"] * 64
    out: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", [vocab, h])}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        out[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
        for proj, o, n in (
            ("q_proj", q, h),
            ("k_proj", kv, h),
            ("v_proj", kv, h),
            ("o_proj", h, q),
        ):
            out[f"{p}.self_attn.{proj}.weight"] = ("BF16", [o, n])
            out[f"{p}.self_attn.{proj}.bias"] = ("BF16", [o])
        out[f"{p}.self_attn.sinks"] = ("BF16", [c["num_attention_heads"]])
        out[f"{p}.mlp.router.weight"] = ("BF16", [e, h])
        out[f"{p}.mlp.router.bias"] = ("BF16", [e])
        out[f"{p}.mlp.experts.gate_up_proj"] = ("BF16", [e, h, 2 * c["intermediate_size"]])
        out[f"{p}.mlp.experts.gate_up_proj_bias"] = ("BF16", [e, 2 * c["intermediate_size"]])
        out[f"{p}.mlp.experts.down_proj"] = ("BF16", [e, c["intermediate_size"], h])
        out[f"{p}.mlp.experts.down_proj_bias"] = ("BF16", [e, h])
    out["model.norm.weight"] = ("BF16", [h])
    out["lm_head.weight"] = ("BF16", [vocab, h])
    return out


def shaped_checkpoint(
    folder: Path,
    config: dict[str, Any],
    tensors: dict[str, Spec],
    *,
    hf_quant: dict[str, Any] | None = None,
    shard_bytes: int = 10_000_000_000,
) -> dict[str, Spec]:
    """Write `tensors` as sparse shards with their index and `config` (and hf_quant_config)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_sharded(folder, tensors, shard_bytes, sparse=True)
    write_config(folder, config)
    if hf_quant is not None:
        write_config(folder, hf_quant, "hf_quant_config.json")
    return tensors
