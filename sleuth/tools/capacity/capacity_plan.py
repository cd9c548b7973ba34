"""capacity_plan: will this checkpoint fit, load and hold how much context, before a launch.

Every number comes from something read: the real tensor bytes in the shard headers (one
pass of the checkpoint probe, as checkpoint_summary), config.json, the GPUs (the host's
nvidia-smi, or the built-in table for GPUs that are not there) and the engine's own
rules (capacity_rules.py, or the installed engine's source, quoted by file:line).
"""

from __future__ import annotations

import json
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.hosts.host import HostError, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity import rules
from sleuth.tools.capacity.gpus import GpuSpec, lookup, parse_gpus
from sleuth.tools.capacity.model import (
    ConfigError,
    Evidence,
    ModelShape,
    max_context,
    model_shape,
    weights_per_gpu,
)
from sleuth.tools.capacity.source import EngineSource, confirm
from sleuth.tools.checkpoints.checkpoint_tools import CheckpointSummary, summarize
from sleuth.tools.context import ToolContext
from sleuth.tools.environment.env_tools import GpuInfoInput, PythonEnv, gpu_info
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult

WEIGHT_MARGIN = 0.05
"""Weights must leave this share of the static budget for the KV pool to count as fitting."""


class CapacityInput(ToolInput):
    model_dir: str = Field(description="Checkpoint folder (config.json + safetensors).")
    gpus: str | None = Field(
        None,
        description="GPUs to plan for, e.g. 8xH200, 4xB200, 2xA100-80GB; omit to use the "
        "host's own GPUs (nvidia-smi).",
    )
    engine: Literal["sglang", "vllm"] = "sglang"
    tp: int = Field(1, ge=1, le=1024, description="Tensor-parallel size.")
    pp: int = Field(1, ge=1, le=1024, description="Pipeline-parallel size.")
    dp: int = Field(1, ge=1, le=1024, description="Data-parallel size (model replicas).")
    ep: int = Field(1, ge=1, le=1024, description="Expert-parallel size (MoE).")
    context_length: int | None = Field(
        None, ge=1, description="Tokens per request; default: the model's maximum."
    )
    kv_cache_dtype: Literal["auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4"] = "auto"
    mem_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="SGLang --mem-fraction-static / vLLM --gpu-memory-utilization; "
        "default: the engine's own default for this GPU.",
    )
    speculative: Literal["none", "mtp", "nextn", "eagle"] = "none"


class Reason(BaseModel):
    check: str
    ok: bool
    detail: str
    evidence: list[Evidence]


class PoolTerms(BaseModel):
    gpu_memory_bytes: int
    mem_fraction: float
    mem_fraction_source: str
    static_budget_bytes: int
    weight_bytes: int
    recurrent_state_bytes: int
    kv_pool_bytes: int


class CapacityPlan(BaseModel):
    model_dir: str
    engine: rules.Engine
    rules_from: str
    """`host source` when the installed engine's lines were read, else the built-in version."""
    gpu: GpuSpec
    gpu_count: int
    gpus_from: str
    tp: int
    pp: int
    dp: int
    ep: int
    context_length: int
    kv_cache_dtype: str
    speculative: str
    verdict: Literal["fits", "does_not_fit", "incompatible"]
    weight_bytes_per_gpu: int
    weight_bytes_total: int
    kv_bytes_per_token_per_gpu: int
    kv_formula: str
    recurrent_state_bytes_per_request_per_gpu: int
    max_kv_tokens: int
    max_concurrent_at_context: int
    max_context_single: int
    model_max_context: int | None
    pool: PoolTerms
    quant_method: str | None
    quant_min_capability: int | None
    reasons: list[Reason]
    engine_source: EngineSource | None
    checkpoint_via: str
    warnings: list[str]


@tool()
def capacity_plan(ctx: ToolContext, args: CapacityInput) -> ToolResult:
    """Answer "will it fit, will it load, how much context" for a checkpoint before a launch.

    Reads the checkpoint's real tensor bytes (shard headers, never data), config.json, the
    GPUs (the host's nvidia-smi, or `gpus` like 8xH200 from a built-in table) and the
    engine's own rules (quoted from the engine's source on the host when installed there).
    Returns `verdict` (fits | does_not_fit | incompatible), weight_bytes_per_gpu,
    kv_bytes_per_token_per_gpu (the engine's KV cell), max_kv_tokens (pool = GPU memory ×
    mem_fraction − weights, each term shown), max_concurrent_at_context, max_context_single,
    and `reasons`: each check (weights fit, KV holds one full request, heads ÷ tp, experts ÷
    ep, sharded sizes ÷ quant group, quant method and KV dtype vs compute capability,
    context vs max_position_embeddings, MTP weights present) with evidence {source, quote}.
    Numbers are computed even when the verdict is incompatible.
    """
    sandboxed = ctx.host(args.host)
    model_dir = sandboxed.resolve(args.model_dir)
    if sandboxed.host.stat(model_dir).kind != "dir":
        raise ToolError(
            f"{model_dir} is not a folder on host {args.host!r}; give the checkpoint folder "
            "that holds config.json and the safetensors files"
        )
    choice = parse_gpus(args.gpus) if args.gpus else None
    with ThreadPoolExecutor(3) as pool:  # the header pass dominates; the rest rides along
        summary_f = pool.submit(summarize, sandboxed, model_dir)
        env_f = pool.submit(_python_env, sandboxed)
        gpus_f = pool.submit(gpu_info, ctx, GpuInfoInput(host=args.host))
        config = _read_config(sandboxed, model_dir)
        summary, env, gpus = summary_f.result(), env_f.result(), gpus_f.result()
    try:
        shape = model_shape(config)
    except ConfigError as exc:
        raise ToolError(f"{model_dir}/config.json: {exc}; capacity_plan needs it") from None
    host_gpu = _host_gpu(args.host, gpus) if (gpus.data or {}).get("gpus") else None
    if choice is not None and host_gpu is not None and host_gpu[0].key == choice.spec.key:
        # The host has this very part: its nvidia-smi figures win over the table's.
        gpu, _, gpu_evidence = host_gpu
        count = choice.count or args.tp * args.pp * args.dp
        gpus_from = f"gpus={args.gpus}, measured by nvidia-smi on {args.host}"
    elif choice is not None:
        gpu, count = choice.spec, choice.count or args.tp * args.pp * args.dp
        gpu_evidence = Evidence(source=gpu.source, quote=f"{gpu.smi_name}: {gpu.memory_mib} MiB, "
                                f"compute capability {gpu.compute_capability}")  # fmt: skip
        gpus_from = f"gpus={args.gpus} (built-in table)"
    else:
        gpu, count, gpu_evidence = _host_gpu(args.host, gpus)
        gpus_from = f"nvidia-smi on {args.host}"
    plan = _plan(args, model_dir, shape, summary, gpu, count, gpu_evidence, gpus_from)
    source = _engine_source(sandboxed, env, args.engine, plan.quant_method, shape.mla)
    _apply_source(plan, source, gpu, _installed_version(env, args.engine))
    output, cut = cap_output(
        plan_text(plan), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=output, data=plan.model_dump(mode="json"), bytes_cut=cut)


def _read_config(sandboxed: SandboxedHost, model_dir: str) -> dict[str, Any]:
    path = sandboxed.resolve(posixpath.join(model_dir, "config.json"))  # a link stays in roots
    try:
        raw = read_whole(sandboxed.host, path, size=16 * 1024 * 1024)
        doc = json.loads(raw)
    except HostError as exc:
        raise ToolError(f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ToolError(f"{path} is not a JSON object")
    return doc


def _python_env(sandboxed: SandboxedHost) -> PythonEnv | None:
    try:
        run = sandboxed.run_program(
            "python_env_probe.py", [], python=sandboxed.config.python, timeout=60
        )
        if run.exit_code != 0:
            return None
        return PythonEnv.model_validate(json.loads(run.stdout))
    except (HostError, ValueError):
        return None  # no engine found: the built-in rules are used and the output says so


def _host_gpu(host: str, gpus: ToolResult) -> tuple[GpuSpec, int, Evidence]:
    found = (gpus.data or {}).get("gpus") or []
    if not found:
        raise ToolError(
            f"host {host!r} has no GPU that nvidia-smi reports; pass gpus=8xH200 (or another "
            "count x GPU) to plan for GPUs that are not there"
        )
    first = found[0]
    row = lookup(first["name"])
    spec = GpuSpec(
        key=row.key if row else first["name"],
        smi_name=first["name"],
        memory_mib=first["memory_total_mib"],
        compute_capability=first["compute_capability"],
        source=f"nvidia-smi on {host}",
    )
    line = next((ln for ln in gpus.output.splitlines() if ln.startswith("GPU 0:")), "")
    return spec, len(found), Evidence(source=f"nvidia-smi on {host}", quote=line)


def _installed_version(env: PythonEnv | None, engine: str) -> str | None:
    """The engine's version on the host, wherever it is installed (inside the roots or not)."""
    for pkg in env.packages if env else []:
        if pkg.name == engine and pkg.installed:
            return pkg.version
    return None


def _engine_source(
    sandboxed: SandboxedHost, env: PythonEnv | None, engine: str, method: str | None, mla: bool
) -> EngineSource | None:
    for pkg in env.packages if env else []:
        if pkg.name == engine and pkg.installed and pkg.path and sandboxed.contains(pkg.path):
            return confirm(sandboxed, engine, pkg.version, pkg.path, method, mla)
    return None


# ---------------------------------------------------------------- the arithmetic


def _plan(
    args: CapacityInput,
    model_dir: str,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpu: GpuSpec,
    count: int,
    gpu_evidence: Evidence,
    gpus_from: str,
) -> CapacityPlan:
    ev = shape.evidence
    reasons: list[Reason] = []
    spec = args.speculative != "none"
    mtp = summary.mtp
    draft_layers = (mtp.declared_layers or 0) if spec else 0
    share = weights_per_gpu(
        [w.model_dump() for w in summary.weight_map],
        tp=args.tp,
        pp=args.pp,
        ep=args.ep,
        kv_heads=shape.kv_heads,
        with_mtp=spec,
        deepseek_mtp_bytes=mtp.bytes if "deepseek" in mtp.conventions else 0,
    )
    elem, fp4 = rules.kv_dtype_bytes(args.kv_cache_dtype, shape.dtype)
    kv_shape = rules.KvShape(
        mla=shape.mla,
        kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        v_head_dim=shape.v_head_dim,
        kv_lora_rank=shape.kv_lora_rank,
        qk_rope_head_dim=shape.qk_rope_head_dim,
        # Each pipeline stage caches only its own layers.
        full_layers=-(-shape.full_layers // args.pp),
        swa_layers=-(-shape.swa_layers // args.pp),
    )
    if args.engine == "sglang":
        cell = rules.sglang_kv_cell(kv_shape, args.tp, elem, fp4, draft_layers)
        fraction = rules.sglang_mem_fraction(gpu.memory_mib, args.tp, args.pp, shape.mla)
    else:
        cell = rules.vllm_kv_cell(kv_shape, args.tp, elem, draft_layers)
        fraction = rules.vllm_mem_fraction()
    if args.mem_fraction is not None:
        fraction = rules.MemoryFraction(
            value=args.mem_fraction, default=False, detail=f"given: {args.mem_fraction}", rules=[]
        )
    memory = gpu.memory_mib * rules.MIB
    budget = int(memory * fraction.value)
    rest = budget - share.bytes_per_gpu
    state = _recurrent_state(shape, args.tp, elem)
    state_total = 0
    if state and rest > 0 and args.engine == "sglang":
        state_total = int(rest * 0.9 / 1.9)  # mamba_full_memory_ratio 0.9: state : KV = 0.9 : 1
    kv_pool = max(0, rest - state_total)
    max_tokens = kv_pool // cell.bytes_per_token if cell.bytes_per_token else 0
    model_max, derivation = max_context(shape)
    context = args.context_length or model_max or 0
    if not context:
        raise ToolError("config.json has no max_position_embeddings; pass context_length")
    concurrent = max_tokens // context
    if state and state_total:
        # SGLang admits at most a third of its state slots as running requests
        # (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3, kv_cache_configurator.py:227).
        concurrent = min(concurrent, (state_total // state) // 3)
    single = min(max_tokens, model_max) if model_max else max_tokens
    pool = PoolTerms(
        gpu_memory_bytes=memory,
        mem_fraction=fraction.value,
        mem_fraction_source=fraction.detail,
        static_budget_bytes=budget,
        weight_bytes=share.bytes_per_gpu,
        recurrent_state_bytes=state_total,
        kv_pool_bytes=kv_pool,
    )
    rule_ev = [Evidence(source=r.source, quote=r.quote) for r in cell.rules]
    frac_ev = [Evidence(source=r.source, quote=r.quote) for r in fraction.rules]
    needed = args.tp * args.pp * args.dp
    reasons.append(Reason(
        check="gpu_count",
        ok=count >= needed,
        detail=f"tp {args.tp} × pp {args.pp} × dp {args.dp} = {needed} GPUs needed, {count} "
        f"{gpu.smi_name} available",
        evidence=[gpu_evidence],
    ))  # fmt: skip
    reasons += _divisibility(args, shape, summary)
    margin_ok = share.bytes_per_gpu <= budget * (1 - WEIGHT_MARGIN)
    reasons.append(Reason(
        check="weights_fit",
        ok=margin_ok,
        detail=f"weights {rules.gib(share.bytes_per_gpu)} per GPU of a static budget "
        f"{gpu.memory_mib} MiB × {fraction.value} = {rules.gib(budget)}"
        + ("" if margin_ok else f" (need ≥{WEIGHT_MARGIN:.0%} left for the KV pool)")
        + (f"; MTP weights {rules.gib(share.mtp_bytes_per_gpu)} included" if spec else ""),
        evidence=[gpu_evidence, *share.evidence, *frac_ev],
    ))  # fmt: skip
    reasons.append(Reason(
        check="kv_holds_one_request",
        ok=max_tokens >= context,
        detail=f"KV pool {rules.gib(kv_pool)} ÷ {cell.bytes_per_token} B/token = {max_tokens:,} "
        f"tokens vs context {context:,}",
        evidence=[*rule_ev, *(Evidence(source=r.source, quote=r.quote)
                              for r in [rules.SG_POOL] if args.engine == "sglang")],
    ))  # fmt: skip
    if state:
        reasons.append(Reason(
            check="recurrent_state",
            ok=True,
            detail=f"{shape.linear_layers} linear-attention layers keep "
            f"{state:,} B of state per request per GPU, outside the KV cell; "
            + (f"SGLang gives the state pool 0.9/1.9 of what is left ({rules.gib(state_total)})"
               if args.engine == "sglang" else
               "vLLM keeps it per running request in the same pool (not subtracted here)"),
            evidence=[rules_ev(rules.SG_HYBRID_LAYERS), rules_ev(rules.SG_MAMBA_SPLIT),
                      *(ev[k] for k in ("layer_types",) if k in ev)],
        ))  # fmt: skip
    reasons.append(_context_reason(context, model_max, derivation, ev))
    method = rules.engine_method(
        summary.quantization.method if summary.quantization else None,
        summary.quantization.algorithm if summary.quantization else None,
    )
    reasons += _quant_reasons(args, method, gpu, gpu_evidence, summary)
    if spec:
        reasons.append(_mtp_reason(summary, draft_layers))
    verdict = _verdict(reasons)
    quant_rule = rules.quant_rules(args.engine).get(method or "")
    return CapacityPlan(
        model_dir=model_dir,
        engine=args.engine,
        rules_from=rules.SGLANG_VERSION if args.engine == "sglang" else rules.VLLM_VERSION,
        gpu=gpu,
        gpu_count=count,
        gpus_from=gpus_from,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        ep=args.ep,
        context_length=context,
        kv_cache_dtype=args.kv_cache_dtype,
        speculative=args.speculative,
        verdict=verdict,
        weight_bytes_per_gpu=share.bytes_per_gpu,
        weight_bytes_total=share.total_bytes,
        kv_bytes_per_token_per_gpu=cell.bytes_per_token,
        kv_formula=cell.formula,
        recurrent_state_bytes_per_request_per_gpu=state,
        max_kv_tokens=max_tokens,
        max_concurrent_at_context=concurrent,
        max_context_single=single,
        model_max_context=model_max,
        pool=pool,
        quant_method=method,
        quant_min_capability=quant_rule.min_capability if quant_rule else None,
        reasons=reasons,
        engine_source=None,
        checkpoint_via=summary.via,
        warnings=list(summary.warnings) + list(summary.errors),
    )


def rules_ev(rule: rules.Rule) -> Evidence:
    return Evidence(source=rule.source, quote=rule.quote)


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


def _divisibility(
    args: CapacityInput, shape: ModelShape, summary: CheckpointSummary
) -> list[Reason]:
    ev = shape.evidence
    out = []
    heads_ok = shape.attention_heads % args.tp == 0
    kv_note = (
        f" < tp {args.tp}: each kv head is replicated on {args.tp // max(1, shape.kv_heads)} GPUs"
        if shape.kv_heads < args.tp and not shape.mla
        else ""
    )
    kv_ok = shape.mla or (
        shape.kv_heads % args.tp == 0
        if shape.kv_heads >= args.tp
        else args.tp % shape.kv_heads == 0
    )
    out.append(Reason(
        check="heads_divisible_by_tp",
        ok=heads_ok and kv_ok,
        detail=f"{shape.attention_heads} attention heads ÷ tp {args.tp}"
        + ("" if heads_ok else " is not whole: the engine refuses this tp")
        + ("" if shape.mla else f"; {shape.kv_heads} kv heads")
        + kv_note
        + ("" if kv_ok else " (tp and the kv heads do not divide one another)"),
        evidence=[ev[k] for k in ("attention_heads", "kv_heads") if k in ev],
    ))  # fmt: skip
    if shape.experts:
        out.append(Reason(
            check="experts_divisible_by_ep",
            ok=shape.experts % args.ep == 0 and args.tp % args.ep == 0 if args.engine == "sglang"
            else shape.experts % args.ep == 0,
            detail=f"{shape.experts} experts ÷ ep {args.ep}"
            + (" (SGLang also needs ep to divide tp)" if args.engine == "sglang" else ""),
            evidence=[ev["experts"]],
        ))  # fmt: skip
    group = _quant_group(summary)
    for key, shards in (("moe_intermediate_size", args.tp // min(args.ep, args.tp)),
                        ("intermediate_size", args.tp)):  # fmt: skip
        size = getattr(shape, key)
        if not isinstance(size, int) or (key == "intermediate_size" and shape.experts and
                                         shape.moe_intermediate_size):  # fmt: skip
            continue
        part = size / shards
        ok = part.is_integer() and (group is None or int(part) % group[0] == 0)
        out.append(Reason(
            check=f"{key}_divisible",
            ok=ok,
            detail=f"{key} {size} ÷ {shards} = {part:g} per GPU"
            + (f", {'' if ok else 'not '}a multiple of the {group[1]} {group[0]}" if group else ""),
            evidence=[ev[key]] if key in ev else [],
        ))  # fmt: skip
    return out


def _quant_group(summary: CheckpointSummary) -> tuple[int, str] | None:
    q = summary.quantization
    if q is None:
        return None
    algo = (q.algorithm or "").upper()
    if "FP4" in algo and "MX" not in algo:
        return 16, "NVFP4 group"
    if q.weight_block_size:
        return int(q.weight_block_size[0]), "FP8 block"
    if q.group_size and q.group_size > 0:
        return int(q.group_size), "quantisation group"
    return None


def _context_reason(
    context: int, model_max: int | None, derivation: str, ev: dict[str, Evidence]
) -> Reason:
    ok = model_max is None or context <= model_max
    return Reason(
        check="context_within_model",
        ok=ok,
        detail=f"context {context:,} vs the model's {derivation}"
        + ("" if ok else "; SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, "
           "vLLM unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (quality past the trained length is not "
           "assured)"),
        evidence=[ev[k] for k in ("max_position_embeddings", "rope_scaling") if k in ev],
    )  # fmt: skip


def _quant_reasons(
    args: CapacityInput,
    method: str | None,
    gpu: GpuSpec,
    gpu_ev: Evidence,
    summary: CheckpointSummary,
) -> list[Reason]:
    out = []
    q = summary.quantization
    q_ev = (
        [
            Evidence(
                source=f"{' + '.join(q.sources)}",
                quote=f"method={q.method}, algorithm={q.algorithm}",
            )
        ]
        if q
        else []
    )
    if method is not None:
        rule = rules.quant_rules(args.engine).get(method)
        if rule is None:
            out.append(Reason(
                check="quantization_on_gpu", ok=True,
                detail=f"{method}: no minimum capability known to Sleuth for {args.engine}; "
                "not checked", evidence=q_ev))  # fmt: skip
        else:
            out.append(_quant_floor(args.engine, rule, gpu, gpu_ev, q_ev))
    kv_min = rules.kv_dtype_min_capability(args.kv_cache_dtype)
    out.append(Reason(
        check="kv_cache_dtype_on_gpu",
        ok=gpu.capability >= kv_min,
        detail=f"KV cache {args.kv_cache_dtype}" + (
            f" needs compute capability {kv_min / 10:.1f}; "
            f"{gpu.smi_name} has {gpu.compute_capability}"
            if kv_min else " (16-bit) runs on any GPU"),
        evidence=[gpu_ev],
    ))  # fmt: skip
    return out


def _quant_floor(
    engine: str, rule: rules.QuantRule, gpu: GpuSpec, gpu_ev: Evidence, q_ev: list[Evidence]
) -> Reason:
    cap = gpu.capability
    ok = cap >= rule.min_capability
    path = (
        "native" if cap >= rule.native_capability else "fallback (weight-only)" if ok else "refused"
    )
    return Reason(
        check="quantization_on_gpu",
        ok=ok,
        detail=f"{engine} {rule.method} needs compute capability ≥ {rule.min_capability / 10:.1f} "
        f"(native kernels from {rule.native_capability / 10:.1f}); {gpu.smi_name} has "
        f"{gpu.compute_capability}: {path}",
        evidence=[*q_ev, Evidence(source=rule.rule.source, quote=rule.rule.quote), gpu_ev],
    )


def _mtp_reason(summary: CheckpointSummary, draft_layers: int) -> Reason:
    m = summary.mtp
    ok = bool(m.declared_layers) and m.tensors > 0
    keys = ", ".join(f"{k}={v}" for k, v in m.declared_by.items()) or "no MTP key"
    return Reason(
        check="mtp_weights_present",
        ok=ok,
        detail=f"config declares {m.declared_layers} MTP layer(s) ({keys}); the headers hold "
        f"{m.tensors} MTP tensors ({m.bytes:,} bytes)"
        + (f"; the draft's {draft_layers} layer(s) are added to the KV cell" if ok else
           "; speculative decoding cannot load heads that are not there"),
        evidence=[Evidence(source="config.json + safetensors headers (checkpoint_summary mtp)",
                           quote=f"mtp: declared {m.declared_layers} ({keys}); "
                           f"found {m.tensors} tensors")],
    )  # fmt: skip


_INCOMPATIBLE = {
    "gpu_count",
    "heads_divisible_by_tp",
    "experts_divisible_by_ep",
    "quantization_on_gpu",
    "kv_cache_dtype_on_gpu",
    "context_within_model",
    "mtp_weights_present",
}


def _verdict(reasons: list[Reason]) -> Literal["fits", "does_not_fit", "incompatible"]:
    failed = {r.check for r in reasons if not r.ok}
    if failed & _INCOMPATIBLE or any(c.endswith("_divisible") for c in failed):
        return "incompatible"
    return "does_not_fit" if failed else "fits"


def _apply_source(
    plan: CapacityPlan, source: EngineSource | None, gpu: GpuSpec, installed: str | None
) -> None:
    """Quote the installed engine's lines; its min capability replaces the built-in one.

    An engine installed outside the roots cannot be read, but its version still picks the
    built-in rule of that release where a rule changed between releases.
    """
    if source is None:
        where = (
            f"{plan.engine} {installed} is installed outside the host's roots"
            if installed
            else f"{plan.engine} not found on the host"
        )
        plan.rules_from = f"built-in rules of {plan.rules_from} ({where})"
        rule = rules.quant_rules(plan.engine).get(plan.quant_method or "")
        if installed and rule is not None and rule.for_version(installed)[1] is not rule.rule:
            value, line = rule.for_version(installed)
            _set_floor(plan, gpu, value, rules_ev(line), f"{plan.engine} {installed}")
        return
    plan.engine_source = source
    version = f" {source.version}" if source.version else ""
    plan.rules_from = f"{plan.engine}{version} installed at {source.root}"
    for reason in plan.reasons:
        if reason.check == "kv_holds_one_request" and source.kv_cell:
            reason.evidence.insert(0, source.kv_cell)
    if source.min_capability:
        found = source.min_capability
        _set_floor(plan, gpu, found.value, found.evidence, f"the installed {plan.engine}")
    plan.verdict = _verdict(plan.reasons)


def _set_floor(plan: CapacityPlan, gpu: GpuSpec, value: int, line: Evidence, who: str) -> None:
    """The quantisation check against `who`'s own minimum capability, quoted first."""
    plan.quant_min_capability = value
    for reason in plan.reasons:
        if reason.check == "quantization_on_gpu":
            reason.ok = gpu.capability >= value
            reason.detail = (
                f"{who} requires compute capability ≥ {value / 10:.1f} for "
                f"{plan.quant_method}; {gpu.smi_name} has {gpu.compute_capability}: "
                f"{'loads' if reason.ok else 'refused at load'}"
            )
            reason.evidence.insert(0, line)
    plan.verdict = _verdict(plan.reasons)


# ---------------------------------------------------------------- text


def plan_text(p: CapacityPlan) -> str:
    lines = [
        f"capacity_plan {p.model_dir}: {p.engine} tp={p.tp} pp={p.pp} dp={p.dp} ep={p.ep} on "
        f"{p.gpu_count}× {p.gpu.smi_name} ({p.gpu.memory_mib} MiB, compute capability "
        f"{p.gpu.compute_capability}; {p.gpus_from}), context {p.context_length:,}, KV "
        f"{p.kv_cache_dtype}, speculative {p.speculative}",
        f"verdict: {p.verdict}",
        f"weight bytes per GPU: {p.weight_bytes_per_gpu:,} ({rules.gib(p.weight_bytes_per_gpu)}) "
        f"of {p.weight_bytes_total:,} in the checkpoint",
        f"KV bytes per token per GPU: {p.kv_bytes_per_token_per_gpu:,} = {p.kv_formula}",
        f"KV pool per GPU: {p.pool.gpu_memory_bytes:,} × {p.pool.mem_fraction} "
        f"({p.pool.mem_fraction_source}) - weights {p.pool.weight_bytes:,}"
        + (
            f" - recurrent state {p.pool.recurrent_state_bytes:,}"
            if p.pool.recurrent_state_bytes
            else ""
        )
        + f" = {p.pool.kv_pool_bytes:,} bytes",
        f"max KV tokens: {p.max_kv_tokens:,}; max concurrent requests at {p.context_length:,} "
        f"tokens: {p.max_concurrent_at_context:,}; longest single request: "
        f"{p.max_context_single:,} tokens",
        f"rules: {p.rules_from}",
    ]
    if p.recurrent_state_bytes_per_request_per_gpu:
        lines.insert(4, f"recurrent state per request per GPU: "
                        f"{p.recurrent_state_bytes_per_request_per_gpu:,} bytes")  # fmt: skip
    for r in p.reasons:
        lines.append(f"[{'ok' if r.ok else 'FAIL'}] {r.check}: {r.detail}")
        lines += [f"    {e.source}: {e.quote}" for e in r.evidence]
    if p.engine_source:
        lines += [f"note: {n}" for n in p.engine_source.notes]
    lines += [f"WARNING: {w}" for w in p.warnings]
    return "\n".join(lines)
