"""A checkpoint's weights per GPU: the real tensor bytes of each weight pattern
checkpoint_summary found, divided the way the engines shard them."""

from __future__ import annotations

import math
import re

from pydantic import BaseModel

from sleuth.hosts.program.checkpoint_probe import DTYPE_BITS
from sleuth.tools.capacity.model import Evidence
from sleuth.tools.checkpoints.models import WeightPattern
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


# Read on a name's text with each of its numbers as `#` (`model.layers.#.mlp.experts.#.w`).
_ROUTER = re.compile(r"(\.mlp\.gate\.|shared_expert_gate\.|\.router\.)")
_EXPERT = re.compile(r"\.experts\.")
_KV_PROJ = re.compile(r"\.(k_proj|v_proj)\.")
_MTP = re.compile(r"(^|\.)mtp(_layers)?\.")
_LAYER = re.compile(r"\.layers\.")


def weights_per_gpu(
    patterns: list[WeightPattern],
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
    biggest: list[tuple[int, WeightPattern]] = []
    for p in patterns:
        name = "#".join(p.parts)
        nbytes = p.count * math.prod(p.shape) * DTYPE_BITS.get(p.dtype, 16) // 8
        total += nbytes
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
    )
