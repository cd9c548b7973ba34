"""From a KV pool to the engine's blocks, groups, token count and concurrency, and its lines.

vLLM pages each layer in blocks of `block_size` tokens and, for hybrid models, splits the
layers into KV cache groups of equal size (kv_cache_utils.py
_get_kv_cache_groups_uniform_page_size); it allocates `pool // page // group_size` blocks
shared by all groups (get_num_blocks). What it prints changed: up to 0.20 the token count is
`blocks // groups x block_size` (_report_kv_cache_config), from 0.21 `int(concurrency x
max_model_len)` (update_kv_cache_capacity), where concurrency is blocks over the blocks one
request of max_model_len needs in every group. V0 printed "# GPU blocks" over all layers.
SGLang keeps one token per slot: `pool // cell` (pool_configurator.py calculate_pool_sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.tools.capacity import rules
from sleuth.tools.capacity.engine_setup import EngineSetup
from sleuth.tools.capacity.model import ModelShape


@dataclass(frozen=True)
class Layout:
    token_bytes: int
    groups: int
    blocks: int
    blocks_per_request: int
    tokens: int
    concurrency: float


def layer_token_bytes(s: EngineSetup, shape: ModelShape) -> int:
    """vLLM's page per token per layer (FullAttentionSpec / MLAAttentionSpec
    real_page_size_bytes ÷ block_size): kv heads on this GPU × (K + V head size), or the MLA
    latent once."""
    if shape.mla:
        return (shape.kv_lora_rank + shape.qk_rope_head_dim) * s.kv_elem
    heads = rules.kv_heads_per_gpu(shape.kv_heads, s.tp)
    return heads * (shape.head_dim + shape.v_head_dim) * s.kv_elem


def layout(s: EngineSetup, shape: ModelShape, pool: int) -> Layout:
    if s.engine == "sglang":
        return _sglang(s, shape, pool)
    per_layer = layer_token_bytes(s, shape)
    full = -(-shape.full_layers // s.pp) + s.draft_layers
    swa = -(-shape.swa_layers // s.pp)
    counts = [n for n in (full, swa) if n] or [1]
    small, big = min(counts), max(counts)
    size = big if big < 1.5 * small else small
    full_groups, swa_groups = -(-full // size), -(-swa // size)
    groups = full_groups + swa_groups
    page = s.block_size * per_layer
    if s.rules == "v0":
        blocks = pool // (page * (full + swa))
        conc = blocks * s.block_size / s.max_model_len
        return Layout(per_layer * (full + swa), 1, blocks, 0, blocks * s.block_size, conc)
    blocks = pool // page // size
    per_request = full_groups * -(-s.max_model_len // s.block_size)
    if swa_groups and shape.sliding_window:
        per_request += swa_groups * _window_blocks(s, shape.sliding_window)
    conc = blocks / per_request if per_request else 0.0
    tokens = (
        blocks // groups * s.block_size if s.rules == "v1-0.19" else int(conc * s.max_model_len)
    )
    return Layout(per_layer * size * groups, groups, blocks, per_request, tokens, conc)


def _window_blocks(s: EngineSetup, window: int) -> int:
    """SlidingWindowSpec.max_memory_usage_bytes: the window plus the tokens in flight (one
    batch; two from 0.21 when async scheduling overlaps steps on a GPU), +1 block."""
    in_flight = s.max_num_batched_tokens * (2 if s.rules == "v1-0.32" and s.device == "gpu" else 1)
    tokens = min(window - 1 + in_flight, s.max_model_len)
    return -(-tokens // s.block_size) + 1


def _sglang(s: EngineSetup, shape: ModelShape, pool: int) -> Layout:
    cell = sglang_cell(s, shape)
    tokens = pool // cell // s.block_size * s.block_size if cell else 0
    return Layout(cell, 1, tokens, s.max_model_len, tokens, tokens / s.max_model_len)


def sglang_cell(s: EngineSetup, shape: ModelShape) -> int:
    return rules.sglang_kv_cell(
        shape.kv_shape(s.pp), s.tp, s.kv_elem, False, s.draft_layers
    ).bytes_per_token


def engine_lines(s: EngineSetup, shape: ModelShape, pool: int, lay: Layout) -> list[str]:
    """The start-up lines the engine prints about its KV cache, as it formats them."""
    length = f"{s.max_model_len:,}"
    if s.engine == "sglang":
        layers = -(-shape.full_layers // s.pp)
        if shape.mla:
            size = lay.tokens * layers * (shape.kv_lora_rank + shape.qk_rope_head_dim)
            sizes = f"KV size: {size * s.kv_elem / rules.GIB:.2f} GB"
        else:
            heads = rules.kv_heads_per_gpu(shape.kv_heads, s.tp) * layers * lay.tokens
            k, v = heads * shape.head_dim * s.kv_elem, heads * shape.v_head_dim * s.kv_elem
            sizes = f"K size: {k / rules.GIB:.2f} GB, V size: {v / rules.GIB:.2f} GB"
        return [
            f"KV Cache is allocated. #tokens: {lay.tokens}, {sizes}",
            f"max_total_num_tokens={lay.tokens}",
        ]
    if s.rules == "v0":
        return [
            f"# GPU blocks: {lay.blocks}",
            f"Maximum concurrency for {s.max_model_len} tokens per request: {lay.concurrency:.2f}x",
        ]
    device = "CPU" if s.device == "cpu" else "GPU"
    concurrency = f"Maximum concurrency for {length} tokens per request: {lay.concurrency:.2f}x"
    tokens = f"{device} KV cache size: {lay.tokens:,} tokens"
    out = [] if s.device == "cpu" else [f"Available KV cache memory: {rules.gib(pool)}"]
    if s.rules == "v1-0.19":
        return [*out, tokens, concurrency]
    return [*out, f"{tokens}, {concurrency}"]
