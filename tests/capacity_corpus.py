"""The comparison corpus (tests/fixtures/capacity_reports/cases.json) read as engine setups.

Each case's `config.json` fields become a ModelShape through the same `model_shape` the tool
uses; its GPU is a row of the built-in table (or the total the engine's own log printed); its
weights per GPU come from the recorded checkpoint size, else from the shape and dtype; its
settings resolve to the engine's defaults where the case leaves them unset. `score(case)`
returns Sleuth's prediction and its error on each figure the engine printed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.tools.capacity import rules
from sleuth.tools.capacity.accounting import KvAccount, account
from sleuth.tools.capacity.engine_setup import (
    EngineSetup,
    counts_context,
    default_batch,
    sglang_rules,
    v0_batch,
    vllm_rules,
)
from sleuth.tools.capacity.gpus import lookup
from sleuth.tools.capacity.model import ModelShape, max_context, model_shape
from sleuth.tools.capacity.online_quant import online_fp8
from sleuth.tools.capacity.rules import GIB, MIB
from sleuth.tools.capacity.topology import comm_buffers, topology

FIXTURES = Path(__file__).parent / "fixtures" / "capacity_reports"
CASES = FIXTURES / "cases.json"
HELD_OUT = FIXTURES / "heldout.json"
"""Engine reports kept out while the accounting was built (the rest of the llm-d-planner sweep)."""
POOL_SHARE = 0.2
"""A case's KV pool is a sliver below this share of the GPU's memory: its error is judged in
memory (as a share of the GPU), not in tokens."""


def load(path: Path = CASES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text())
    return cases


def predictable(case: dict[str, Any]) -> bool:
    if case.get("unpredictable_reason"):
        return False
    return case["model"].get("num_hidden_layers") is not None or "text_config" in case["model"]


@dataclass(frozen=True)
class Scored:
    case: dict[str, Any]
    account: KvAccount
    gpu_bytes: int
    reported_tokens: int | None
    token_error: float | None
    """(predicted - reported) / reported KV tokens."""
    concurrency_error: float | None
    memory_error_share: float | None
    """|predicted - reported| KV memory as a share of the GPU's memory."""
    pool_share: float
    """The reported KV pool as a share of the GPU's memory."""


def score(case: dict[str, Any]) -> Scored:
    setup, shape, weights = setup_for(case)
    got = account(setup, shape, weights)
    rep = case["reported"]
    tokens = rep.get("kv_cache_tokens")
    if tokens is None and rep.get("gpu_blocks") is not None:
        tokens = rep["gpu_blocks"] * setup.block_size
    predicted = got.kv_tokens if setup.rules != "v0" else got.blocks * setup.block_size
    token_error = (predicted - tokens) / tokens if tokens else None
    conc = rep.get("max_concurrency")
    conc_error = (got.max_concurrency - conc) / conc if conc else None
    reported_bytes = tokens * got.token_bytes if tokens else 0
    gpu = setup.memory_bytes
    memory_error = abs(predicted - tokens) * got.token_bytes / gpu if tokens else None
    return Scored(
        case, got, gpu, tokens, token_error, conc_error, memory_error, reported_bytes / gpu
    )


def setup_for(case: dict[str, Any]) -> tuple[EngineSetup, ModelShape, int]:
    model, s, gpu = case["model"], case["setup"], case["gpu"]
    shape = model_shape(_config(model))
    spec = lookup(gpu["key"])
    assert spec is not None, gpu["key"]
    memory = int(gpu["memory_gib"] * GIB) if gpu.get("memory_gib") else spec.engine_memory_mib * MIB
    engine = case["engine"]
    rules_name = _rules(case)
    act = 4 if s.get("dtype") in ("float32", "fp32") else 2
    kv = 1 if str(s.get("kv_cache_dtype") or "auto").startswith("fp8") else act
    length = s.get("max_model_len") or s.get("context_length") or _model_max(shape)
    batched, seqs = default_batch(engine, "gpu", memory, spec.smi_name, case.get("version"))
    if rules_name == "v0":
        batched, seqs = v0_batch(length, case.get("version"), bool(shape.swa_layers), spec.rocm)
    fraction = s.get("gpu_memory_utilization") or s.get("mem_fraction_static")
    if fraction is None:
        fraction = (
            0.9
            if engine == "vllm"
            else rules.sglang_default_fraction(
                rules_name, spec.memory_mib, s["tp"], s["pp"], shape.mla
            ).value
        )
    links = topology(
        s["tp"], s.get("nodes") or 1, s.get("interconnect") or "auto", spec.nvlink, spec.key
    )
    setup = EngineSetup(
        engine=engine,
        rules=rules_name,
        context_counted=engine == "vllm"
        and counts_context(case.get("version"), v0=rules_name == "v0"),
        tp=s["tp"],
        pp=s.get("pp") or 1,
        memory_bytes=memory,
        smi_memory_mib=spec.memory_mib,
        sms=spec.sms,
        fraction=fraction,
        max_model_len=length,
        max_num_seqs=s.get("max_num_seqs") or s.get("max_running_requests") or seqs,
        max_num_batched_tokens=s.get("max_num_batched_tokens") or batched,
        block_size=s.get("block_size") or (1 if engine == "sglang" else 16),
        kv_elem=kv,
        act_elem=act,
        enforce_eager=bool(s.get("enforce_eager")),
        online_fp8=online_fp8(s.get("quantization"), _declared(model)),
        custom_all_reduce=links.custom_all_reduce and not s.get("disable_custom_all_reduce"),
        comm=comm_buffers(spec, links),
        links_why=links.why,
    )
    return setup, shape, weights_per_gpu(model, shape, setup)


def _declared(model: dict[str, Any]) -> str | None:
    """The quantization the checkpoint itself declares (its config's quant_method)."""
    return (model.get("quantization_config") or {}).get("quant_method")


def _config(model: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in model.items() if k not in ("layer_types",) or isinstance(v, list)}


def _rules(case: dict[str, Any]) -> str:
    if case["engine"] == "sglang":
        return sglang_rules(case.get("version"))
    if case.get("vllm_generation") == "v0":
        return "v0"
    return vllm_rules(case.get("version") or "0.10")  # V1 threads predate 0.21


def _model_max(shape: ModelShape) -> int:
    found, _ = max_context(shape)
    return found or 4096


def weights_per_gpu(model: dict[str, Any], shape: ModelShape, s: EngineSetup) -> int:
    """The checkpoint's bytes (recorded, else from the shape) sharded by tp, embeddings and
    head counted whole on a pipeline stage; float32 loading doubles 16-bit weights; online
    FP8 (`--quantization fp8` on an unquantised checkpoint) stores the decoder layers'
    linear weights at 1 B instead of 2, as capacity_plan's weights.py does."""
    embed = shape.vocab_size * shape.hidden_size * 2
    tied = bool(model.get("tie_word_embeddings") or model.get("text_config", {}).get("tie"))
    ends = embed if tied else 2 * embed
    total = (
        int(model["weights_total_gib"] * GIB)
        if model.get("weights_total_gib")
        else _shape_bytes(model, shape, ends)
    )
    if s.online_fp8:
        total -= shape.layers * _linear_params(shape)
    if s.act_elem == 4 and not model.get("quantization_config"):
        total, ends = total * 2, ends * 2
    if s.pp == 1:
        return total // s.tp
    return (total - ends) // (s.tp * s.pp) + embed * s.act_elem // 2 // s.tp


def _shape_bytes(model: dict[str, Any], shape: ModelShape, ends: int) -> int:
    """Parameters from the shape (attention, MLP or experts, norms) at the checkpoint's
    bytes per weight: 2, fp8 and int8 1 (+ 16-bit attention where the config keeps it), int4
    0.5; AWQ and GPTQ at their bits, with a 16-bit scale and a packed zero per group."""
    h, layers = shape.hidden_size, shape.layers
    attn, mlp = _attention_params(shape, _text(model)), _mlp_params(shape, _text(model))
    dense = _dense_layers(model)
    config = model.get("quantization_config") or {}
    method = str(config.get("quant_method", ""))
    scheme = str(config.get("scheme", ""))
    if method in ("awq", "gptq") and config.get("bits"):
        packed, group = config["bits"] / 8, config.get("group_size") or 128
        per_weight = packed + (2 + packed) / group
    elif "W4A16" in scheme:
        per_weight = 0.5 + 2 / 128  # int4 + a 16-bit scale per group of 128
    elif "fp8" in method or "W8A8" in scheme:
        per_weight = 1.0
    else:
        per_weight = 2.0
    attn_bytes = attn * (2.0 if "fbgemm" in method else per_weight)
    # DeepSeek-style MoE keeps its first layers dense (first_k_dense_replace)
    dense_mlp = 3 * h * (shape.intermediate_size or 0) if dense else 0
    mlp_bytes = (layers - dense) * mlp + dense * dense_mlp
    return int(layers * (attn_bytes + 4 * h) + mlp_bytes * per_weight + ends)


def _text(model: dict[str, Any]) -> dict[str, Any]:
    text: dict[str, Any] = model.get("text_config") or model
    return text


def _dense_layers(model: dict[str, Any]) -> int:
    return int(_text(model).get("first_k_dense_replace") or 0)


def _attention_params(shape: ModelShape, config: dict[str, Any]) -> int:
    """q and o (hidden × heads × head_dim each), k and v (hidden × kv heads × head_dim each);
    MLA: the q (low-rank where q_lora_rank is set), the joint kv down-projection with its rope
    part, the kv up-projection and o."""
    h, heads = shape.hidden_size, shape.attention_heads
    if shape.mla and config.get("qk_nope_head_dim"):
        rope, nope = config["qk_rope_head_dim"], config["qk_nope_head_dim"]
        kv, v, q_rank = config["kv_lora_rank"], config["v_head_dim"], config.get("q_lora_rank")
        q = h * q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        return q + h * (kv + rope) + kv * heads * (nope + v) + heads * v * h
    return h * heads * shape.head_dim * 2 + h * 2 * shape.kv_heads * shape.head_dim


def _mlp_params(shape: ModelShape, config: dict[str, Any]) -> int:
    """gate, up and down per expert, shared experts included (or once, dense), with the
    router's hidden × experts."""
    h = shape.hidden_size
    if shape.experts:
        inter = shape.moe_intermediate_size or shape.intermediate_size or 0
        shared = int(config.get("n_shared_experts") or 0)
        return (shape.experts + shared) * 3 * h * inter + shape.experts * h
    return 3 * h * (shape.intermediate_size or 0)


def _linear_params(shape: ModelShape) -> int:
    """One decoder layer's linear weights, the part online FP8 stores at 1 B (the router
    stays 16-bit)."""
    router = shape.hidden_size * shape.experts if shape.experts else 0
    return _attention_params(shape, {}) + _mlp_params(shape, {}) - router


def summary(values: list[float]) -> tuple[float, float]:
    """(median, 90th percentile) of absolute values, nearest-rank."""
    ordered = sorted(abs(v) for v in values)
    if not ordered:
        return math.nan, math.nan
    rank = max(0, math.ceil(0.9 * len(ordered)) - 1)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return median, ordered[rank]
