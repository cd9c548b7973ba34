"""capacity_plan's text: the verdict, each number with its terms, each reason with its evidence."""

from __future__ import annotations

from sleuth.tools.capacity.accounting import KvAccount
from sleuth.tools.capacity.plan import CapacityPlan
from sleuth.tools.capacity.rules import gib


def plan_text(p: CapacityPlan) -> str:
    lines = [
        f"capacity_plan {p.model_dir}: {p.engine} tp={p.tp} pp={p.pp} dp={p.dp} ep={p.ep} on "
        f"{p.gpu_count}× {p.gpu.smi_name} ({p.gpu.memory_mib} MiB, compute capability "
        f"{p.gpu.compute_capability}; {p.gpus_from}), context {p.context_length:,}, KV "
        f"{p.kv_cache_dtype}, speculative {p.speculative}"
        + (f", --quantization {p.quantization}" if p.quantization else ""),
        f"verdict: {p.verdict}",
        *([f"answer ({p.inverse.question}): {p.inverse.answer}"] if p.inverse else []),
        f"weight bytes per GPU: {p.weight_bytes_per_gpu:,} ({gib(p.weight_bytes_per_gpu)}) "
        f"of {p.weight_bytes_total:,} in the checkpoint",
        f"KV bytes per token per GPU: {p.kv_bytes_per_token_per_gpu:,} = {p.kv_formula}",
        *account_lines(p.engine_account),
        f"max KV tokens: {p.max_kv_tokens:,}; max concurrent requests at {p.context_length:,} "
        f"tokens: {p.max_concurrent_at_context:,}; longest single request: "
        f"{p.max_context_single:,} tokens",
        f"rules: {p.rules_from}",
        f"engine version: {p.engine_version.note}",
        f"links: {p.topology.links_from}; {p.topology.why}",
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


def account_lines(a: KvAccount) -> list[str]:
    """The engine's accounting, one line a term, then the lines it would print."""
    out = [f"engine accounting ({a.engine}, rules {a.rules}): budget {a.budget_how} = "
           f"{a.budget_bytes:,} B ({gib(a.budget_bytes)})"]  # fmt: skip
    for t in a.terms:
        mark = f" [estimated ±{t.spread:.0%}]" if t.estimated else ""
        out.append(f"  - {t.name}: {t.bytes:,} B ({gib(t.bytes)}) = {t.how}{mark}; {t.source}")
    out.append(
        f"KV pool per GPU: {a.kv_pool_bytes:,} B ({gib(a.kv_pool_bytes)}); "
        f"{a.blocks:,} blocks of {a.block_size} tokens in {a.groups} group(s)"
    )
    out += [f"predicted engine line: {line}" for line in a.lines]
    if a.uncertain:
        out.append(f"uncertain (±{a.token_spread:,} tokens in all): " + "; ".join(a.uncertain))
    return out
