"""Capacity: will a checkpoint fit on N GPUs at a tp and a context, and how much KV cache."""

from __future__ import annotations

import re
from typing import Any

from sleuth.agent.playbook.checkpoints import model_dirs, no_checkpoint
from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, Result, summary_text
from sleuth.tools.capacity.plan import CapacityPlan

_GPUS = re.compile(r"\b(\d+)\s*[x×]\s*((?:nvidia[\s-]*)?[a-z]{1,3}\d{2,3}[a-z0-9-]*)", re.I)
_GPU_NAME = re.compile(
    r"\b((?:gb|b|h|a|l)\d{2,3}s?(?:-?(?:sxm|pcie|nvl|\d+gb))*|mi3\d\dx|gh200|rtx[\s-]?a\d{4})\b",
    re.I,
)
_CONTEXT = re.compile(
    r"(\d+(?:\.\d+)?)\s*([km])?\s*(?:tokens?\s+(?:of\s+)?)?context"
    r"|context(?:\s+length)?\s+(?:of\s+)?(\d+(?:\.\d+)?)\s*([km])?",
    re.I,
)
_CONCURRENCY = re.compile(
    r"(\d+)\s+(?:concurrent|simultaneous|parallel)\s+(?:requests?|users?|sessions?)"
    r"|concurrency\s+(?:of\s+)?(\d+)",
    re.I,
)
_MIN_GPUS = re.compile(
    r"\b(?:how many|smallest number of|fewest|minimum number of)\s+(?:[\w-]+\s+)?gpus", re.I
)
_MAX_CONTEXT = re.compile(r"\b(?:longest|maximum|max)\s+context", re.I)
SAID = {"fits": "fits", "does_not_fit": "does not fit", "incompatible": "will not load"}


def capacity_input(q: Question, model_dir: str) -> dict[str, Any]:
    """capacity_plan's input from the question's words: GPUs, parallelism, context, engine."""
    args: dict[str, Any] = {"host": q.host, "model_dir": model_dir}
    text = q.text
    gpus = _GPUS.search(text)
    if gpus:
        args["gpus"] = f"{gpus.group(1)}x{gpus.group(2)}"
    elif named := _GPU_NAME.search(text):
        args["gpus"] = named.group(1)
    for key in ("tp", "pp", "dp", "ep"):
        found = re.search(rf"\b{key}(?:[\s=-]*size)?[\s=:]*(\d+)\b", text, re.I)
        if found:
            args[key] = int(found.group(1))
    if "tp" not in args and gpus:
        args["tp"] = int(gpus.group(1))
    context = _CONTEXT.search(text)
    if context:
        number, unit = context.group(1) or context.group(3), context.group(2) or context.group(4)
        scale = {"k": 1024, "m": 1024 * 1024}.get((unit or "").lower(), 1)
        args["context_length"] = int(float(number) * scale)
    if q.has("vllm"):
        args["engine"] = "vllm"
    if re.search(r"fp8\s+kv|kv(?:\s+cache)?\s+(?:in\s+)?fp8", text, re.I):
        args["kv_cache_dtype"] = "fp8_e4m3"
    if q.has("mtp", "nextn", "eagle", "speculative"):
        args["speculative"] = "eagle" if q.has("eagle") else "mtp"
    _inverse(text, args)
    return args


def _inverse(text: str, args: dict[str, Any]) -> None:
    """The inverse questions: fewest GPUs for C requests of L tokens, or the longest context
    at concurrency C; the GPU type is named without a count for the first."""
    found = _CONCURRENCY.search(text)
    if found is None:
        return
    args["concurrency"] = int(found.group(1) or found.group(2))
    if _MIN_GPUS.search(text):
        args["find"] = "min_gpus"
        args.pop("tp", None)
    elif _MAX_CONTEXT.search(text):
        args["find"] = "max_context"
        args.pop("context_length", None)


def plan_capacity(q: Question) -> Plan:
    dirs = yield from model_dirs(q)
    if not dirs:
        return no_checkpoint(q)
    (result,) = yield [Call("capacity_plan", capacity_input(q, dirs[0]))]
    plan = result.model(CapacityPlan)
    if plan is None:
        report = Report(
            f"capacity_plan could not answer for {dirs[0]}: {result.output.strip()[:300]}",
            "unknown",
            0.4,
            [(result, result.line("error"))],
        )
        yield [report]
        return summary_text([report])
    reports = _capacity_reports(result, plan)
    yield reports
    return summary_text(reports)


def _capacity_reports(r: Result, d: CapacityPlan) -> list[Report]:
    gpu = d.gpu.smi_name
    setup = (
        f"{d.model_dir} on {d.gpu_count}× {gpu} with {d.engine} tp {d.tp}"
        + (f" pp {d.pp}" if d.pp > 1 else "")
        + f" at a {d.context_length:,}-token context"
    )
    failed = [x for x in d.reasons if not x.ok]
    why = "; ".join(f"{x.check}: {x.detail}" for x in failed[:3])
    fits = d.verdict == "fits"
    reports = [_inverse_report(r, d)] if d.inverse else []
    reports += [
        Report(
            f"{setup}: {SAID[d.verdict]}. Weights take "
            f"{d.weight_bytes_per_gpu / 2**30:.2f} GiB per GPU; the KV cache costs "
            f"{d.kv_bytes_per_token_per_gpu:,} bytes per token per GPU, so the pool "
            f"holds {d.max_kv_tokens:,} tokens: "
            f"{d.max_concurrent_at_context:,} concurrent request(s) at that context"
            + (f". Blocking: {why}" if failed else "")
            + f". Engine version: {d.engine_version.note}",
            "yes" if fits else "no",
            0.8 if fits else 0.85,
            [
                (r, r.line("verdict:")),
                (r, r.line("KV bytes per token per GPU:")),
                (r, r.line("max KV tokens:")),
                *((r, r.line(f"[FAIL] {x.check}:")) for x in failed[:2]),
                (r, r.line("engine version:")),
            ],
            [
                "Confirm with one launch: SGLang logs 'KV Cache is allocated. #tokens', vLLM "
                "'GPU KV cache size: N tokens'."
            ],
        )
    ]
    quant = next((x for x in d.reasons if x.check == "quantization_on_gpu"), None)
    if quant is not None:
        reports.append(
            Report(
                f"Quantisation on {gpu}: {quant.detail}",
                "yes" if quant.ok else "no",
                0.8,
                [(r, r.line("quantization_on_gpu:")), (r, r.line("rules:"))],
            )
        )
    return reports


def _inverse_report(r: Result, d: CapacityPlan) -> Report:
    assert d.inverse is not None
    acc = d.engine_account
    return Report(
        f"{d.inverse.question[0].upper()}{d.inverse.question[1:]} with {d.engine}: "
        f"{d.inverse.answer} (predicted {acc.kv_tokens:,} KV tokens per replica, "
        f"{acc.max_concurrency:.2f} requests at {acc.context:,} tokens"
        + (f"; uncertain: {acc.uncertain[0]}" if acc.uncertain else "")
        + ")",
        "yes" if d.inverse.gpus or d.inverse.context else "no",
        0.75,
        [(r, r.line("answer (")), (r, r.line("predicted engine line:"))],
    )


FAMILY = Family(
    name="capacity",
    help="capacity: will a checkpoint fit on N GPUs at a tp and context, how much KV, the "
    "fewest GPUs for C requests of L tokens, the longest context at concurrency C",
    plan=plan_capacity,
    words=(
        "fit",
        "kv cache",
        "kv-cache",
        "how much context",
        "how long a context",
        "context length",
        "out of memory",
        "oom",
        "enough memory",
        "how many tokens",
        "concurrent requests",
        "how many gpus",
        "smallest number of gpus",
        "fewest gpus",
        "longest context",
        "maximum context",
    ),
    rank=20,
)
