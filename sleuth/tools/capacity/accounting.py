"""The engines' own KV cache accounting, step by step, down to the lines they print.

`account(setup, shape, weights)` follows one engine's start-up: the budget (GPU memory as
CUDA reports it x the memory fraction), each term it subtracts (weights, the rotary cache,
the profile's activation peak, non-torch memory, CUDA graphs, SGLang's pre-load memory and
Mamba state), the pool left, its rounding into blocks and KV cache groups, and the figures
the engine logs: vLLM's "GPU KV cache size: N tokens", "Maximum concurrency for L tokens per
request" (V0: "# GPU blocks"), its CPU build's "CPU KV cache size", SGLang's "KV Cache is
allocated. #tokens: N, K size, V size". Estimated terms carry a spread; `uncertain` names
those that could move the answer by more than 2 % of the pool.
"""

from __future__ import annotations

from pydantic import BaseModel

from sleuth.tools.capacity import kv_blocks, online_quant
from sleuth.tools.capacity.engine_setup import CommBuffers, EngineSetup
from sleuth.tools.capacity.model import ModelShape
from sleuth.tools.capacity.rules import GIB, gib
from sleuth.tools.capacity.terms import Term
from sleuth.tools.capacity.vllm_profile import profile_terms

SG = "sglang 0.5.23 python/sglang/srt/"
SGLANG_PRELOAD = int(0.5 * GIB)
SGLANG_PRELOAD_TP: dict[CommBuffers, tuple[int, float, str]] = {
    "nvswitch": (
        int(1.23 * GIB),
        0.25,
        "NCCL/all-reduce buffers (SGLang 0.5.12 at tp 8 on H200: 'Init torch distributed "
        "ends ... mem usage=1.23 GB')",
    ),
    "nccl": (
        int(0.12 * GIB),
        1.0,
        "NCCL buffers off NVSwitch Hopper nodes (vLLM 0.10.1.1 at tp 2 on A100: 0.12 GiB; "
        "SGLang 0.4.3.post4 on 4 L4 had 0.4 GB in use before its weights, context included)",
    ),
    "rccl": (int(0.5 * GIB), 1.0, "RCCL/all-reduce buffers (not measured on AMD)"),
}
"""What a tp group holds before SGLang loads its weights, by collective buffers (topology)."""
UNCERTAIN_SHARE = 0.02
FROM_SETUP = {"engine", "rules", "device", "memory_bytes", "fraction", "block_size"}
"""The setup's fields an account carries as they are."""


class KvAccount(BaseModel):
    """An engine's KV cache as it would size it on one GPU, and the lines it would print."""

    engine: str
    rules: str
    device: str
    memory_bytes: int
    fraction: float
    budget_bytes: int
    budget_how: str
    terms: list[Term]
    kv_pool_bytes: int
    token_bytes: int
    """KV bytes one token takes on one GPU across the cached layers."""
    block_size: int
    groups: int
    """KV cache groups (vLLM hybrid models: one per attention type and layer slice)."""
    blocks: int
    blocks_per_request: int
    kv_tokens: int
    """The token count the engine prints."""
    context: int
    max_concurrency: float
    """Requests of `context` tokens the pool holds at once, as the engine computes it."""
    lines: list[str]
    uncertain: list[str]
    token_spread: int
    """± tokens the estimated terms together could move kv_tokens."""


def account(s: EngineSetup, shape: ModelShape, weights: int) -> KvAccount:
    """The KV pool, its blocks and the engine's printed figures for this setup."""
    if s.device == "cpu":
        budget = s.cpu_kv_space_bytes
        how = f"VLLM_CPU_KVCACHE_SPACE = {budget // GIB} GiB (the whole KV budget on CPU)"
        terms: list[Term] = []
    else:
        budget = int(s.memory_bytes * s.fraction)
        how = f"{gib(s.memory_bytes)} (CUDA total) × {s.fraction}"
        terms = [_weights(weights, s), _rotary(s, shape)]
        terms += (
            _sglang_terms(s, shape, budget - sum(t.bytes for t in terms))
            if s.engine == "sglang"
            else profile_terms(s, shape)
        )
    pool = max(0, budget - sum(t.bytes for t in terms))
    layout = kv_blocks.layout(s, shape, pool)
    spread = sum(int(t.bytes * t.spread) for t in terms)
    token_spread = spread // layout.token_bytes if layout.token_bytes else 0
    return KvAccount(
        **s.model_dump(include=FROM_SETUP),
        budget_bytes=budget,
        budget_how=how,
        terms=terms,
        kv_pool_bytes=pool,
        token_bytes=layout.token_bytes,
        groups=layout.groups,
        blocks=layout.blocks,
        blocks_per_request=layout.blocks_per_request,
        kv_tokens=layout.tokens,
        context=s.max_model_len,
        max_concurrency=layout.concurrency,
        lines=kv_blocks.engine_lines(s, shape, pool, layout),
        uncertain=_uncertain(terms, pool, layout.token_bytes),
        token_spread=token_spread,
    )


def _weights(weights: int, s: EngineSetup) -> Term:
    how = "the checkpoint's tensor bytes on this GPU, sharded as the engine shards them"
    source = (
        f"{SG}model_executor/model_runner.py load_model"
        if s.engine == "sglang"
        else "vllm 0.19.0 vllm/v1/worker/gpu_model_runner.py:4820 ('Model loading took')"
    )
    if s.online_fp8:
        how, rule = online_quant.weights_how(s.engine)
        source = f"{source}; {rule}"
    return Term(name="weights", bytes=weights, how=how, source=source)


def _rotary(s: EngineSetup, shape: ModelShape) -> Term:
    """vLLM and SGLang build the rotary cos/sin cache over the whole max_position_embeddings,
    in the model's dtype, once per GPU."""
    positions = shape.max_position_embeddings or s.max_model_len
    value = positions * shape.rotary_dim * s.act_elem
    return Term(
        name="rotary cos/sin cache",
        bytes=value,
        how=f"{positions} positions × rotary dim {shape.rotary_dim} × {s.act_elem} B",
        source="vllm 0.19.0 vllm/model_executor/layers/rotary_embedding/base.py "
        "_compute_cos_sin_cache (cache.to(dtype))",
    )


def _sglang_terms(s: EngineSetup, shape: ModelShape, rest: int) -> list[Term]:
    """SGLang: rest_memory = free after load - pre_load_free x (1 - mem_fraction_static), so
    the pool is mem_fraction_static x (the memory free before the weights) - the weights;
    what was in use before the load is taken at the fraction."""
    extra, spread, what = SGLANG_PRELOAD_TP[s.comm] if s.tp > 1 else (0, 0.5, "")
    preload = SGLANG_PRELOAD + extra
    terms = [
        Term(
            name="memory in use before the weights load (× fraction)",
            bytes=int(preload * s.fraction),
            how=f"({gib(SGLANG_PRELOAD)} CUDA context"
            + (f" + {gib(extra)} {what}" if extra else "")
            + f") × {s.fraction}",
            source=f"{SG}mem_cache/kv_cache_configurator.py:3007 slack_gb = "
            "pre_model_load_memory * (1 - mem_fraction_static); context measured 527 MiB "
            "on an H200",
            estimated=True,
            spread=spread,
        )
    ]
    if shape.linear_layers:
        left = rest - terms[0].bytes
        terms.append(
            Term(
                name="Mamba/linear-attention state pool",
                bytes=max(0, int(left * 0.9 / 1.9)),
                how="what is left × 0.9 / (1 + 0.9) (mamba_full_memory_ratio 0.9)",
                source=f"{SG}arg_groups/fields/schedule.py:225 mamba_full_memory_ratio",
            )
        )
    return terms


def _uncertain(terms: list[Term], pool: int, token_bytes: int) -> list[str]:
    out = []
    for t in terms:
        off = int(t.bytes * t.spread)
        if t.estimated and (pool <= 0 or off > UNCERTAIN_SHARE * pool):
            tokens = f", ±{off // token_bytes:,} tokens" if token_bytes else ""
            out.append(f"{t.name}: estimated, ±{gib(off)}{tokens}")
    return out
