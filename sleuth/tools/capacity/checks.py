"""The reasons of a plan: each check (GPU count, divisibility, weights, KV, context,
quantisation, MTP) judged on the plan's numbers, with its evidence, and the verdict.

`apply_source` re-judges the quantisation floor on the installed engine's own lines.
"""

from __future__ import annotations

from sleuth.tools.capacity import online_quant, quant_rules, rules
from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.model import Evidence, ModelShape
from sleuth.tools.capacity.plan import CapacityInput, CapacityPlan, PlannedGpus, Reason, Verdict
from sleuth.tools.capacity.sizing import Sizing, declared_method
from sleuth.tools.capacity.source import EngineSource
from sleuth.tools.checkpoints.models import CheckpointSummary

WEIGHT_MARGIN = 0.05
"""Weights must leave this share of the static budget for the KV pool to count as fitting."""

_INCOMPATIBLE = {
    "gpu_count",
    "heads_divisible_by_tp",
    "experts_divisible_by_ep",
    "quantization_on_gpu",
    "online_quantization",
    "kv_cache_dtype_on_gpu",
    "context_within_model",
    "mtp_weights_present",
}


def reasons(
    args: CapacityInput,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpus: PlannedGpus,
    sizing: Sizing,
    method: str | None,
) -> list[Reason]:
    """Every check that applies, in the order the plan shows them."""
    out = [_gpu_count(args, gpus)]
    out += _divisibility(args, shape, summary)
    out += [_weights_fit(args, gpus, sizing), _kv_holds_one_request(args, sizing)]
    if sizing.state:
        out.append(_recurrent_state(args, shape, sizing))
    out.append(_context_reason(sizing, shape.evidence))
    out += _quant_reasons(args, method, gpus, summary)
    if args.quantization:
        out.append(_online_quantization(args, shape, summary, sizing))
    if args.speculative != "none":
        out.append(_mtp_reason(summary, sizing.draft_layers))
    return out


def verdict(found: list[Reason]) -> Verdict:
    failed = {r.check for r in found if not r.ok}
    if failed & _INCOMPATIBLE or any(c.endswith("_divisible") for c in failed):
        return "incompatible"
    return "does_not_fit" if failed else "fits"


def rule_evidence(rule: rules.Rule) -> Evidence:
    return Evidence(source=rule.source, quote=rule.quote)


def _gpu_count(args: CapacityInput, gpus: PlannedGpus) -> Reason:
    needed = args.tp * args.pp * args.dp
    return Reason(
        check="gpu_count",
        ok=gpus.count >= needed,
        detail=f"tp {args.tp} × pp {args.pp} × dp {args.dp} = {needed} GPUs needed, "
        f"{gpus.count} {gpus.spec.smi_name} available",
        evidence=[gpus.evidence],
    )


def _weights_fit(args: CapacityInput, gpus: PlannedGpus, s: Sizing) -> Reason:
    weights = s.share.bytes_per_gpu
    cpu = s.account.device == "cpu"
    margin_ok = cpu or weights <= s.account.budget_bytes * (1 - WEIGHT_MARGIN)
    budget = f"a budget {s.account.budget_how} = {rules.gib(s.account.budget_bytes)}"
    return Reason(
        check="weights_fit",
        ok=margin_ok,
        detail=f"weights {rules.gib(weights)} per GPU of "
        + ("host memory (CPU backend; the KV cache has its own space)" if cpu else budget)
        + ("" if margin_ok else f" (need ≥{WEIGHT_MARGIN:.0%} left for the KV pool)")
        + (
            f"; MTP weights {rules.gib(s.share.mtp_bytes_per_gpu)} included"
            if args.speculative != "none"
            else ""
        ),
        evidence=[gpus.evidence, *s.share.evidence, *map(rule_evidence, s.fraction.rules)],
    )


def _kv_holds_one_request(args: CapacityInput, s: Sizing) -> Reason:
    pool = [rules.SG_POOL] if args.engine == "sglang" else []
    return Reason(
        check="kv_holds_one_request",
        ok=s.max_tokens >= s.context,
        detail=f"KV pool {rules.gib(s.account.kv_pool_bytes)} ÷ {s.cell.bytes_per_token} B/token = "
        f"{s.max_tokens:,} tokens vs context {s.context:,}",
        evidence=[rule_evidence(r) for r in [*s.cell.rules, *pool]],
    )


def _recurrent_state(args: CapacityInput, shape: ModelShape, s: Sizing) -> Reason:
    split = (
        f"SGLang gives the state pool 0.9/1.9 of what is left ({rules.gib(s.state_total)})"
        if args.engine == "sglang"
        else "vLLM keeps it per running request in the same pool (not subtracted here)"
    )
    return Reason(
        check="recurrent_state",
        ok=True,
        detail=f"{shape.linear_layers} linear-attention layers keep {s.state:,} B of state "
        f"per request per GPU, outside the KV cell; {split}",
        evidence=[
            rule_evidence(rules.SG_HYBRID_LAYERS),
            rule_evidence(rules.SG_MAMBA_SPLIT),
            *(shape.evidence[k] for k in ("layer_types",) if k in shape.evidence),
        ],
    )


def _divisibility(
    args: CapacityInput, shape: ModelShape, summary: CheckpointSummary
) -> list[Reason]:
    ev = shape.evidence
    out = [_heads_divisible(args, shape)]
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


def _heads_divisible(args: CapacityInput, shape: ModelShape) -> Reason:
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
    return Reason(
        check="heads_divisible_by_tp",
        ok=heads_ok and kv_ok,
        detail=f"{shape.attention_heads} attention heads ÷ tp {args.tp}"
        + ("" if heads_ok else " is not whole: the engine refuses this tp")
        + ("" if shape.mla else f"; {shape.kv_heads} kv heads")
        + kv_note
        + ("" if kv_ok else " (tp and the kv heads do not divide one another)"),
        evidence=[
            shape.evidence[k] for k in ("attention_heads", "kv_heads") if k in shape.evidence
        ],
    )


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


def _context_reason(s: Sizing, ev: dict[str, Evidence]) -> Reason:
    ok = s.model_max is None or s.context <= s.model_max
    return Reason(
        check="context_within_model",
        ok=ok,
        detail=f"context {s.context:,} vs the model's {s.derivation}"
        + ("" if ok else "; SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, "
           "vLLM unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (quality past the trained length is not "
           "assured)"),
        evidence=[ev[k] for k in ("max_position_embeddings", "rope_scaling") if k in ev],
    )  # fmt: skip


def _quant_reasons(
    args: CapacityInput, method: str | None, gpus: PlannedGpus, summary: CheckpointSummary
) -> list[Reason]:
    out = []
    gpu, gpu_ev = gpus.spec, gpus.evidence
    q = summary.quantization
    q_ev = (
        [
            Evidence(
                source=" + ".join(q.sources), quote=f"method={q.method}, algorithm={q.algorithm}"
            )
        ]
        if q
        else []
    )
    if method is not None:
        rule = quant_rules.quant_rules(args.engine).get(method)
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


def _online_quantization(
    args: CapacityInput, shape: ModelShape, summary: CheckpointSummary, s: Sizing
) -> Reason:
    """`--quantization fp8`: stored as FP8 as it loads, the checkpoint's own method, or a
    mismatch the engine refuses."""
    declared = declared_method(summary, args.engine)
    ok, detail, found = online_quant.judged(args.engine, declared, s.share, shape.dtype or "16-bit")
    return Reason(
        check="online_quantization",
        ok=ok,
        detail=detail,
        evidence=[rule_evidence(r) for r in found],
    )


def _quant_floor(
    engine: str,
    rule: quant_rules.QuantRule,
    gpu: GpuSpec,
    gpu_ev: Evidence,
    q_ev: list[Evidence],
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
        evidence=[*q_ev, rule_evidence(rule.rule), gpu_ev],
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


def apply_source(
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
        rule = quant_rules.quant_rules(plan.engine).get(plan.quant_method or "")
        if installed and rule is not None and rule.for_version(installed)[1] is not rule.rule:
            value, line = rule.for_version(installed)
            _set_floor(plan, gpu, value, rule_evidence(line), f"{plan.engine} {installed}")
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
    plan.verdict = verdict(plan.reasons)


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
    plan.verdict = verdict(plan.reasons)
