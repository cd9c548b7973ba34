"""A checkpoint's weights per GPU: the real tensor bytes of each weight pattern
checkpoint_summary found, divided the way the engines shard them."""

from __future__ import annotations

import math
import re

from pydantic import BaseModel

from sleuth.hosts.program.checkpoint_probe import DTYPE_BITS
from sleuth.tools.capacity.model import Evidence
from sleuth.tools.checkpoints.models import CheckpointSummary, WeightPattern
from sleuth.tools.checkpoints.render import pattern_line


class WeightShare(BaseModel):
    bytes_per_gpu: int
    total_bytes: int
    replicated_bytes: int
    """Bytes every GPU holds whole: norms, routers, scalar scales."""
    expert_bytes_per_gpu: int
    mtp_bytes_per_gpu: int
    """Included in bytes_per_gpu only when speculative decoding loads them."""
    evidence: list[Evidence]
    fp8_tensors: int = 0
    """With online FP8: the decoder layers' linear weight tensors stored at 1 B as they load."""
    fp8_bytes_before: int = 0
    """Those tensors' bytes in the checkpoint (whole checkpoint, before sharding)."""
    fp8_bytes_after: int = 0


# Read on a name's text with each of its numbers as `#` (`model.layers.#.mlp.experts.#.w`).
_ROUTER = re.compile(r"(\.(mlp|block_sparse_moe)\.gate\.|shared_expert_gate\.|\.router\.)")
_EXPERT = re.compile(r"\.experts\.")
_KV_PROJ = re.compile(r"\.(k_proj|v_proj)\.")
_MTP = re.compile(r"(^|\.)mtp(_layers)?\.")
_LAYER = re.compile(r"\.layers\.")
# Online FP8 quantises a decoder block's weight matrices; it leaves what is not the linear or
# MoE method's weight (online_quant.py) and a multimodal tower's blocks in the checkpoint dtype.
_BLOCK = re.compile(r"(^|\.)(layers|h|blocks)\.#")
_NOT_LINEAR = re.compile(r"bias|norm|embed|lm_head|scale|sinks|conv1d")
_TOWER = re.compile(r"vision|visual|audio|image")
_FLOAT16 = {"BF16", "F16", "F32"}


def weights_per_gpu(
    summary: CheckpointSummary,
    *,
    tp: int,
    pp: int,
    ep: int,
    kv_heads: int,
    with_mtp: bool,
    online_fp8: bool = False,
) -> WeightShare:
    """Each pattern's real bytes divided the way the engines shard it.

    Vocab-parallel embeddings, attention and dense MLP: ÷ tp. K/V projections: ÷ min(tp,
    kv_heads) (kv heads are replicated past that). Routed experts: ÷ max(tp, ep) (experts
    across ep, each split by tp ÷ ep). Norms, routers, 0-d scales: whole on every GPU.
    Layer weights ÷ pp (a stage's share); embeddings, head and final norm counted whole, a
    bound for the first and last stage; MTP only when loaded. `online_fp8` (`--quantization
    fp8` on an unquantised checkpoint): the decoder layers' 16/32-bit weight matrices at 1 B.
    A DeepSeek-convention MTP layer sits among the decoder layers (`layers.<n>`) and counts
    as MTP, not as a layer, so capacity and preflight size it the same way.
    """
    mtp_facts = summary.mtp
    deepseek_mtp_bytes = mtp_facts.bytes if "deepseek" in mtp_facts.conventions else 0
    total = replicated = experts = mtp = 0
    fp8 = [0, 0, 0]  # tensors, bytes as stored, bytes at 1 B
    layer_bytes = other = 0
    biggest: list[tuple[int, WeightPattern]] = []
    for p in summary.weight_map:
        name = "#".join(p.parts)
        nbytes = p.count * math.prod(p.shape) * DTYPE_BITS.get(p.dtype, 16) // 8
        total += nbytes
        if online_fp8 and _stored_as_fp8(name, p):
            fp8[0], fp8[1] = fp8[0] + p.count, fp8[1] + nbytes
            nbytes = p.count * math.prod(p.shape)
            fp8[2] += nbytes
        if len(p.shape) <= 1 or _ROUTER.search(name):
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
        fp8_tensors=fp8[0],
        fp8_bytes_before=fp8[1],
        fp8_bytes_after=fp8[2],
    )


def _stored_as_fp8(name: str, p: WeightPattern) -> bool:
    """A decoder layer's weight matrix (2-D, or 3-D fused experts) in a 16/32-bit float:
    what the engines' online FP8 linear and MoE methods quantise as they load."""
    own = ".".join(name.rsplit(".", 2)[-2:])  # `q_proj.weight`, `experts.down_proj_bias`
    return (
        len(p.shape) >= 2
        and p.dtype in _FLOAT16
        and bool(_BLOCK.search(name))
        and not _ROUTER.search(name)
        and not _NOT_LINEAR.search(own)
        and not _TOWER.search(name)
    )
