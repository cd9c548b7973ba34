"""What vLLM's start-up profile run takes out of the KV budget, term by term.

vLLM V1 (gpu_worker.py determine_available_memory) gives the KV cache
`requested_memory - (weights + torch peak increase + non-torch increase)`, less the CUDA graph
estimate from 0.21 on. The torch peak is the larger of the model's forward pass over
`max_num_batched_tokens` tokens and the sampler over `min(max_num_seqs, tokens)` rows of
logits (profile_run runs the second while the first's hidden states are still held); MoE
layers keep their fused-MoE workspace across both. Each estimate names the engine line it
rests on; the non-torch and CUDA graph terms are measured constants, marked estimated.
"""

from __future__ import annotations

from sleuth.tools.capacity.engine_setup import CommBuffers, EngineSetup
from sleuth.tools.capacity.model import ModelShape
from sleuth.tools.capacity.rules import GIB, MIB, gib
from sleuth.tools.capacity.terms import Term
from sleuth.tools.capacity.topology import CUSTOM_AR_BUFFERS, RULE

V019 = "vllm 0.19.0"
CUBLAS_WORKSPACE = 32 * MIB
"""PyTorch's cuBLAS workspace on Hopper (4096 KiB x 8), allocated through its caching
allocator at the first matmul, inside the profile (measured: 33,554,432 B on an H200)."""
NON_TORCH_BASE = int(0.25 * GIB)
CUDA_CONTEXT = int(0.51 * GIB)
"""The CUDA context and runtime before anything is loaded: vLLM 0.19.0's init snapshot on an
H100 at tp 1 ('cuda_memory=0.51GiB, torch_memory=0.0GiB', llm-d-planner PR 205 logs)."""
GRAPH_BASE = int(0.5 * GIB)
GRAPH_PER_LAYER = 12 * MIB


def profile_terms(s: EngineSetup, shape: ModelShape) -> list[Term]:
    """The activation peak, non-torch and CUDA graph terms of vLLM's profile (GPU)."""
    terms = [activation_peak(s, shape), non_torch(s)]
    graph = cuda_graphs(s, shape)
    if graph is not None:
        terms.append(graph)
    return terms


def activation_peak(s: EngineSetup, shape: ModelShape) -> Term:
    # Both generations profile max_num_batched_tokens tokens (V0 model_runner.py profile_run,
    # V1 gpu_model_runner.py profile_run); V0's default is engine_setup.v0_batch.
    tokens = s.max_num_batched_tokens
    forward, f_how = _forward(s, shape, tokens)
    moe, moe_how = _moe_workspace(s, shape, tokens)
    sample = _v0_sampler if s.rules == "v0" else _sampler
    sampler, s_how = sample(s, shape, tokens)
    peak = moe + max(forward, sampler) + CUBLAS_WORKSPACE
    which = "sampler" if sampler > forward else "forward"
    how = (
        f"{moe_how + ' + ' if moe else ''}max(forward {gib(forward)} = {f_how}"
        + (f", sampler {gib(sampler)} = {s_how}" if sampler else "")
        + f") [{which}] + cuBLAS workspace 32 MiB"
    )
    source = (
        f"{V019} vllm/v1/worker/gpu_model_runner.py:5782 profile_run "
        "(_dummy_run(max_num_tokens) then _dummy_sampler_run); vllm/v1/sample/sampler.py:90, "
        "ops/topk_topp_sampler.py:112,165; fused_moe/fused_moe.py:1988 workspace_shapes"
        if s.rules != "v0"
        else "vllm 0.6.4 worker/worker.py determine_num_available_blocks, "
        "worker/model_runner.py profile_run: max_num_batched_tokens tokens over max_num_seqs "
        "sequences (engine_setup.v0_batch), sampled with top_k = vocab - 1 and top_p = 0.99 "
        "(model_executor/layers/sampler.py _apply_top_k_top_p)"
    )
    return Term(
        name="activation peak (profile run)",
        bytes=peak,
        how=how,
        source=source,
        estimated=True,
        # V0's profiler kept the allocator's cached blocks and its chunked-prefill default
        # moved between releases: its peak is known to within a factor, not a share.
        spread=1.0 if s.rules == "v0" else 0.25,
    )


def _forward(s: EngineSetup, shape: ModelShape, tokens: int) -> tuple[int, str]:
    """The largest layer's live tensors: the residual, the layer input and its output, plus
    the MLP's gate_up (2 x intermediate / tp) and activation (intermediate / tp) outputs, or
    the attention's qkv and output projections, whichever is larger."""
    hidden = shape.hidden_size
    inter = 0 if shape.experts else shape.intermediate_size or 0
    mlp = 3 * inter // s.tp
    heads, kv = shape.attention_heads, shape.kv_heads
    attn = ((2 * heads + 2 * kv) * shape.head_dim) // s.tp
    width = 3 * hidden + max(mlp, attn)
    return tokens * width * s.act_elem, f"{tokens} tokens × (3×{hidden} + {max(mlp, attn)})"


def _moe_workspace(s: EngineSetup, shape: ModelShape, tokens: int) -> tuple[int, str]:
    """TritonExperts.workspace_shapes: (M, topk, max(N/2, K)) and (M, topk, max(N, K)) with
    N = 2 x moe_intermediate / tp and K = hidden, kept by the workspace manager."""
    topk = shape.experts_per_token
    inter = shape.moe_intermediate_size or shape.intermediate_size  # Mixtral names it so
    if not (shape.experts and topk and inter):
        return 0, ""
    n, k = 2 * inter // s.tp, shape.hidden_size
    elems = tokens * topk * (max(n // 2, k) + max(n, k))
    return elems * s.act_elem, f"MoE workspace {gib(elems * s.act_elem)}"


def _v0_sampler(s: EngineSetup, shape: ModelShape, tokens: int) -> tuple[int, str]:
    """V0's profile samples every sequence with top_k = vocab - 1 and top_p = 0.99
    (worker/model_runner.py _dummy_run, 0.5.3.post1 to 0.8.2), so _apply_top_k_top_p
    (model_executor/layers/sampler.py) holds, per logit: the model's logits, their float copy,
    the sorted values (4 B) and indices (8 B), the top-k mask (1 B), the softmax and its
    cumsum (4 B each), the top-p mask (1 B) and the re-sorted logits (4 B), as 0.6.3 to 0.8.2
    write it (0.6.0 and before gathered through an 8 B inverse index: 8 B more)."""
    rows = min(s.max_num_seqs, tokens)
    per = s.act_elem + 4 + 4 + 8 + 1 + 4 + 4 + 1 + 4
    return rows * shape.vocab_size * per, f"{rows} rows × {shape.vocab_size} vocab × {per} B"


def _sampler(s: EngineSetup, shape: ModelShape, tokens: int) -> tuple[int, str]:
    """Logits in the model dtype, their float32 copy (none when already float32), the
    softmax probabilities and the exponential noise, each rows x vocab; the top-k/top-p
    kernel's buffer of min(SMs, rows) vocab rows; the forward's hidden states still held."""
    rows = min(s.max_num_seqs, tokens)
    vocab = -(-shape.vocab_size // 64) * 64  # VocabParallelEmbedding pads to 64
    per = s.act_elem + (0 if s.act_elem == 4 else 4) + 4 + 4
    buffer = min(s.sms, rows) * vocab * 4
    held = (tokens + 2 * rows) * shape.hidden_size * s.act_elem
    total = rows * vocab * per + buffer + held
    return total, f"{rows} rows × {vocab} vocab × {per} B + buffer + hidden states"


TP_BUFFERS: dict[CommBuffers, tuple[int, float, str]] = {
    "nvswitch": (
        int(1.85 * GIB),
        0.12,
        "NCCL and custom all-reduce buffers at tp > 1 on an NVSwitch Hopper node, measured "
        "with vLLM 0.19.0 on H100 SXM",
    ),
    "nccl": (
        int(0.12 * GIB),
        1.0,
        "NCCL buffers at tp > 1 off NVSwitch Hopper/Blackwell nodes, measured with vLLM "
        "0.10.1.1 on one node of A100 80GB at tp 2 (dennislee22/vLLM-benchmarking logs: 0.67 "
        "against 0.56 GiB of non-weight, non-KV memory at tp 1); over PCIe or across nodes "
        "not measured",
    ),
    "rccl": (
        int(1.85 * GIB),
        1.0,
        "RCCL and custom all-reduce buffers at tp > 1: the NVIDIA H100 figure, not measured "
        "on AMD GPUs (RCCL's channel count alone moved the MI300X pool by 1.31 GiB per GPU)",
    ),
}
"""The tp > 1 non-torch increase by collective library: (bytes, spread, what it is)."""


def non_torch(s: EngineSetup) -> Term:
    parallel = s.tp > 1
    value = NON_TORCH_BASE
    how = "0.25 GiB (CUDA/cuBLAS/Triton runtime)"
    spread = 0.5
    if s.context_counted:
        value += CUDA_CONTEXT
        how += (
            " + 0.51 GiB CUDA context (this release charged every non-torch byte on the "
            "device: peak_memory += total - free - torch allocated)"
        )
    if parallel:
        extra, spread, what = TP_BUFFERS[s.comm]
        value += extra
        how += f" + {gib(extra)} {what}"
        if not s.custom_all_reduce:
            value -= CUSTOM_AR_BUFFERS
            how += f" - {CUSTOM_AR_BUFFERS // MIB} MiB of custom all-reduce buffers ({s.links_why})"
    return Term(
        name="non-torch memory (profile increase)",
        bytes=value,
        how=how,
        source=f"{V019} vllm/utils/mem_utils.py memory_profiling non_torch_increase; value "
        "measured in vLLM 0.19.0 logs (0.24-0.27 GiB at tp 1, 2.06-2.21 GiB at tp 2-4 on "
        f"H100 SXM); {RULE}",
        estimated=True,
        spread=spread,
    )


def capture_sizes(max_size: int) -> list[int]:
    """vLLM's default CUDA graph batch sizes up to `max_size` (VllmConfig._set_cudagraph_sizes:
    [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16), cut at max)."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16)]
    return [n for n in sizes if n <= max_size]


FULL_CAPTURE = len(capture_sizes(512))
"""51 graphs: the capture the 12 MiB-per-layer figure was measured at."""


def cuda_graphs(s: EngineSetup, shape: ModelShape) -> Term | None:
    """From 0.21 vLLM subtracts its CUDA graph estimate (profile_cudagraph_memory); before
    that, and with --enforce-eager, graphs come out of the headroom above the utilization.
    The per-layer part scales with the number of graphs captured (each graph keeps its own
    kernel nodes per layer); the base (the shared pool) does not."""
    if s.rules != "v1-0.32" or s.enforce_eager:
        return None
    layers = shape.layers // s.pp
    graphs = len(capture_sizes(s.max_capture_size))
    value = GRAPH_BASE + GRAPH_PER_LAYER * layers * graphs // FULL_CAPTURE
    return Term(
        name="CUDA graph memory (estimate)",
        bytes=value,
        how=f"0.5 GiB + 12 MiB × {layers} layers × {graphs}/{FULL_CAPTURE} graphs (batch "
        f"sizes up to {s.max_capture_size}; {s.capture_how})",
        source="vllm 0.21+ vllm/v1/worker/gpu_worker.py determine_available_memory "
        "(cudagraph_memory_estimate_applied, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 "
        "by default); value from 'Estimated CUDA graph memory' in vLLM 0.19.0 logs "
        "(0.6-1.6 GiB, captures up to 512); vllm/config/vllm.py _set_cudagraph_sizes",
        estimated=True,
        spread=0.5,
    )
