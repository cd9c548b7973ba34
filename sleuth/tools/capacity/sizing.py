"""The arithmetic of a plan: weights per GPU, the KV cell, the engine's accounting, tokens and
requests.

The KV cell and memory fraction are engine rules from rules.py; the pool, its blocks and the
engine's printed figures come from accounting.py on an `EngineSetup` resolved here from the
input, the GPU and the engine's defaults. The reasons (checks.py) then judge these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.tools.capacity import rules
from sleuth.tools.capacity.accounting import KvAccount, account
from sleuth.tools.capacity.engine_setup import (
    EngineSetup,
    capture_limit,
    counts_context,
    default_batch,
    default_block_size,
    sglang_rules,
    v0_batch,
    vllm_rules,
)
from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.model import ModelShape, max_context
from sleuth.tools.capacity.online_quant import online_fp8
from sleuth.tools.capacity.plan import CapacityInput
from sleuth.tools.capacity.quant_rules import engine_method
from sleuth.tools.capacity.rules import GIB, MIB
from sleuth.tools.capacity.topology import Topology, comm_buffers, topology
from sleuth.tools.capacity.weights import WeightShare, weights_per_gpu
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.results import ToolError

MAMBA_RUNNING_RATIO = 3
"""SGLang admits at most a third of its state slots as running requests
(MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, kv_cache_configurator.py:227)."""


@dataclass(frozen=True)
class Sizing:
    draft_layers: int
    """The speculative draft's layers, whose KV the cell includes (0 without speculation)."""
    share: WeightShare
    cell: rules.KvCell
    fraction: rules.MemoryFraction
    account: KvAccount
    state: int
    """Recurrent state of one request on one GPU (hybrid linear-attention models)."""
    state_total: int
    max_tokens: int
    context: int
    model_max: int | None
    derivation: str
    """How model_max follows from config.json (rope scaling included)."""
    concurrent: int
    single: int


def size(
    args: CapacityInput,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpu: GpuSpec,
    installed: str | None = None,
) -> Sizing:
    """The plan's numbers for these inputs on this GPU; a model without a maximum context
    needs `context_length`. `installed` is the engine's version on the host, if known."""
    mtp = summary.mtp
    draft_layers = (mtp.declared_layers or 0) if args.speculative != "none" else 0
    online = online_fp8(args.quantization, declared_method(summary, args.engine))
    share = weights_per_gpu(
        summary,
        tp=args.tp,
        pp=args.pp,
        ep=args.ep,
        kv_heads=shape.kv_heads,
        with_mtp=args.speculative != "none",
        online_fp8=online,
    )
    elem, fp4 = rules.kv_dtype_bytes(args.kv_cache_dtype, shape.dtype)
    cell = _kv_cell(args, shape, elem, fp4, draft_layers)
    fraction = _mem_fraction(args, shape, gpu, args.engine_version or installed)
    model_max, derivation = max_context(shape)
    context = args.context_length or model_max or 0
    if not context:
        raise ToolError("config.json has no max_position_embeddings; pass context_length")
    setup = engine_setup(
        args, shape, gpu, fraction.value, context, elem, draft_layers, installed, online
    )
    acc = account(setup, shape, share.bytes_per_gpu)
    state = _recurrent_state(shape, args.tp, elem)
    state_total = next((t.bytes for t in acc.terms if t.name.startswith("Mamba")), 0)
    max_tokens = acc.kv_tokens
    concurrent = int(acc.max_concurrency) if args.engine == "vllm" else max_tokens // context
    if state and state_total:
        concurrent = min(concurrent, (state_total // state) // MAMBA_RUNNING_RATIO)
    return Sizing(
        draft_layers=draft_layers,
        share=share,
        cell=cell,
        fraction=fraction,
        account=acc,
        state=state,
        state_total=state_total,
        max_tokens=max_tokens,
        context=context,
        model_max=model_max,
        derivation=derivation,
        concurrent=concurrent,
        single=min(max_tokens, model_max) if model_max else max_tokens,
    )


def declared_method(summary: CheckpointSummary, engine: rules.Engine) -> str | None:
    """The engine's name for the quantization the checkpoint declares; None if unquantised."""
    q = summary.quantization
    return engine_method(q.method, q.algorithm, engine) if q else None


def engine_setup(
    args: CapacityInput,
    shape: ModelShape,
    gpu: GpuSpec,
    fraction: float,
    context: int,
    elem: int,
    draft_layers: int,
    installed: str | None,
    online_fp8: bool = False,
) -> EngineSetup:
    """What the engine sizes from: the input where given, else the engine's own defaults."""
    cpu = gpu.key == "CPU"
    device = "cpu" if cpu else "gpu"
    memory = 0 if cpu else gpu.engine_memory_mib * MIB
    version = args.engine_version or installed
    batched, seqs = default_batch(args.engine, device, memory, gpu.smi_name, version)
    rules = sglang_rules(version) if args.engine == "sglang" else vllm_rules(version, gpu)
    if rules == "v0":
        batched, seqs = v0_batch(context, version, bool(shape.swa_layers), gpu.rocm)
    links = links_of(args, gpu)
    max_seqs = args.max_num_seqs or seqs
    max_batched = args.max_num_batched_tokens or batched
    capture, capture_how = capture_limit(args.max_cudagraph_capture_size, max_seqs, max_batched)
    act = 4 if str(shape.dtype).lower() in ("float32", "fp32") else 2
    return EngineSetup(
        engine=args.engine,
        rules=rules,
        context_counted=args.engine == "vllm" and counts_context(version, rules == "v0"),
        device=device,
        tp=args.tp,
        pp=args.pp,
        memory_bytes=memory,
        smi_memory_mib=gpu.memory_mib,
        sms=gpu.sms,
        fraction=fraction,
        max_model_len=context,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=max_batched,
        max_capture_size=capture,
        capture_how=capture_how,
        block_size=args.block_size or default_block_size(args.engine, device, shape.mla),
        kv_elem=elem,
        act_elem=act,
        enforce_eager=args.enforce_eager,
        cpu_kv_space_bytes=args.cpu_kv_space_gib * GIB if cpu else 0,
        draft_layers=draft_layers,
        online_fp8=online_fp8,
        custom_all_reduce=links.custom_all_reduce,
        comm=comm_buffers(gpu, links),
        links_why=links.why,
    )


def links_of(args: CapacityInput, gpu: GpuSpec) -> Topology:
    """The tp group's topology: the question's interconnect and nodes, else the GPU row's."""
    return topology(args.tp, args.nodes, args.interconnect, gpu.nvlink, gpu.key)


def _kv_cell(
    args: CapacityInput, shape: ModelShape, elem: int, fp4: bool, draft_layers: int
) -> rules.KvCell:
    kv_shape = shape.kv_shape(args.pp)
    if args.engine == "sglang":
        return rules.sglang_kv_cell(kv_shape, args.tp, elem, fp4, draft_layers)
    return rules.vllm_kv_cell(kv_shape, args.tp, elem, draft_layers)


def _mem_fraction(
    args: CapacityInput, shape: ModelShape, gpu: GpuSpec, version: str | None
) -> rules.MemoryFraction:
    if args.mem_fraction is not None:
        return rules.MemoryFraction(
            value=args.mem_fraction, default=False, detail=f"given: {args.mem_fraction}", rules=[]
        )
    if args.engine == "sglang":
        return rules.sglang_default_fraction(
            sglang_rules(version), gpu.memory_mib, args.tp, args.pp, shape.mla
        )
    return rules.vllm_mem_fraction()


def _recurrent_state(shape: ModelShape, tp: int, elem: int) -> int:
    lin = shape.linear
    if not shape.linear_layers or not {"num_key_heads", "num_value_heads"} <= lin.keys():
        return 0
    return rules.gdn_state_bytes_per_request(
        shape.linear_layers,
        tp,
        lin.get("conv_kernel_dim", 4),
        lin["num_key_heads"],
        lin["num_value_heads"],
        lin.get("key_head_dim", 128),
        lin.get("value_head_dim", 128),
        conv_elem=2 if elem < 4 else elem,
    )
