"""capacity_plan: will this checkpoint fit, load and hold how much context, before a launch.

Every number comes from something read: the real tensor bytes in the shard headers (one
pass of the checkpoint probe, as checkpoint_summary), config.json, the GPUs (the host's
nvidia-smi, or the built-in table for GPUs that are not there) and the engine's own
rules (rules.py and quant_rules.py, or the installed engine's source, quoted by file:line).
"""

from __future__ import annotations

import json
import posixpath
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sleuth.hosts.host import HostError, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity import checks, inverse, quant_rules, rules
from sleuth.tools.capacity.engine_setup import engine_version
from sleuth.tools.capacity.gpus import GpuChoice, GpuSpec, lookup, parse_gpus
from sleuth.tools.capacity.model import (
    Evidence,
    ModelConfigError,
    ModelShape,
    max_context,
    model_shape,
)
from sleuth.tools.capacity.plan import CapacityInput, CapacityPlan, PlannedGpus, PoolTerms
from sleuth.tools.capacity.render import plan_text
from sleuth.tools.capacity.sizing import declared_method, links_of, size
from sleuth.tools.capacity.source import EngineSource, confirm
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.checkpoints.summarize import summarize
from sleuth.tools.context import ToolContext
from sleuth.tools.environment.gpu_info import GpuInventory, gpu_line, query_gpus
from sleuth.tools.environment.python_env import PythonEnv
from sleuth.tools.registry import tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


@tool()
def capacity_plan(ctx: ToolContext, args: CapacityInput) -> ToolResult:
    """Answer "will it fit, will it load, how much context" for a checkpoint before a launch.

    Reads the checkpoint's real tensor bytes (shard headers, never data), config.json, the
    GPUs (the host's nvidia-smi, or `gpus` like 8xH200 from a built-in table) and the
    engine's own rules (quoted from the engine's source on the host when installed there).
    Returns `verdict` (fits | does_not_fit | incompatible), weight_bytes_per_gpu,
    kv_bytes_per_token_per_gpu (the engine's KV cell), max_kv_tokens and engine_account (the
    engine's own accounting: CUDA total × fraction − weights − activation peak − non-torch −
    CUDA graphs, block rounding, each term with its rule, and the KV lines the engine will
    print), max_concurrent_at_context, max_context_single,
    and `reasons`: each check (weights fit, KV holds one full request, heads ÷ tp, experts ÷
    ep, sharded sizes ÷ quant group, quant method and KV dtype vs compute capability,
    context vs max_position_embeddings, MTP weights present) with evidence {source, quote}.
    Numbers are computed even when the verdict is incompatible.
    """
    plan = make_plan(ctx.host(args.host), args)
    output, cut = cap_output(
        plan_text(plan), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(ok=True, output=output, data=plan.model_dump(mode="json"), bytes_cut=cut)


def make_plan(sandboxed: SandboxedHost, args: CapacityInput) -> CapacityPlan:
    """The plan for these inputs on this host: the checkpoint, the GPUs, the engine's rules."""
    model_dir = sandboxed.resolve(args.model_dir, folder=True)
    if sandboxed.files.stat(model_dir).kind != "dir":
        raise ToolError(
            f"{model_dir} is not a folder on host {args.host!r}; give the checkpoint folder "
            "that holds config.json and the safetensors files"
        )
    choice = (
        parse_gpus(args.gpus, args.gpu_memory_mib, args.gpu_compute_capability)
        if args.gpus and args.gpus.lower() != "cpu"
        else None
    )
    with ThreadPoolExecutor(3) as pool:  # the header pass dominates; the rest rides along
        summary_f = pool.submit(summarize, sandboxed, model_dir)
        env_f = pool.submit(_python_env, sandboxed)
        gpus_f = pool.submit(query_gpus, sandboxed)
        config = _read_config(sandboxed, model_dir)
        summary, env, (inventory, _) = summary_f.result(), env_f.result(), gpus_f.result()
    try:
        shape = model_shape(config)
    except ModelConfigError as exc:
        raise ToolError(f"{model_dir}/config.json: {exc}; capacity_plan needs it") from None
    gpus = cpu_gpus(args) if (args.gpus or "").lower() == "cpu" else None
    gpus = gpus or _planned_gpus(args, choice, inventory)
    installed = _installed_version(env, args.engine)
    answer = None
    if args.find == "min_gpus":
        args, answer = inverse.smallest_gpus(args, shape, summary, gpus.spec, installed)
        gpus = gpus.model_copy(update={"count": args.tp * args.pp * args.dp})
    elif args.find == "max_context":
        top = max_context(shape)[0] or args.context_length or 131072
        args, answer = inverse.longest_context(args, shape, summary, gpus.spec, installed, top)
    plan = build_plan(args, model_dir, shape, summary, gpus, installed)
    plan.inverse = answer
    source = _engine_source(sandboxed, env, args.engine, plan.quant_method, shape.mla)
    checks.apply_source(plan, source, gpus.spec, installed)
    return plan


def build_plan(
    args: CapacityInput,
    model_dir: str,
    shape: ModelShape,
    summary: CheckpointSummary,
    gpus: PlannedGpus,
    installed: str | None = None,
) -> CapacityPlan:
    """The plan from the built-in rules: its numbers, its reasons and their verdict."""
    s = size(args, shape, summary, gpus.spec, installed)
    release = engine_version(args.engine, args.engine_version, installed, gpus.spec)
    declared = declared_method(summary, args.engine)
    # Online FP8 runs the engine's fp8 method, whose capability floor then applies.
    method = declared or args.quantization
    found = checks.reasons(args, shape, summary, gpus, s, method)
    floor = quant_rules.quant_rules(args.engine).get(method or "")
    return CapacityPlan(
        model_dir=model_dir,
        engine=args.engine,
        rules_from=_rules_from(args.engine, s.account.rules),
        engine_version=release,
        topology=links_of(args, gpus.spec),
        gpu=gpus.spec,
        gpu_count=gpus.count,
        gpus_from=gpus.source,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        ep=args.ep,
        context_length=s.context,
        kv_cache_dtype=args.kv_cache_dtype,
        quantization=args.quantization,
        speculative=args.speculative,
        verdict=checks.verdict(found),
        weight_bytes_per_gpu=s.share.bytes_per_gpu,
        weight_bytes_total=s.share.total_bytes,
        kv_bytes_per_token_per_gpu=s.cell.bytes_per_token,
        kv_formula=s.cell.formula,
        recurrent_state_bytes_per_request_per_gpu=s.state,
        max_kv_tokens=s.max_tokens,
        max_concurrent_at_context=s.concurrent,
        max_context_single=s.single,
        model_max_context=s.model_max,
        pool=PoolTerms(
            gpu_memory_bytes=s.account.memory_bytes,
            mem_fraction=s.fraction.value,
            mem_fraction_source=s.fraction.detail,
            static_budget_bytes=s.account.budget_bytes,
            weight_bytes=s.share.bytes_per_gpu,
            recurrent_state_bytes=s.state_total,
            kv_pool_bytes=s.account.kv_pool_bytes,
        ),
        quant_method=method,
        quant_min_capability=floor.min_capability if floor else None,
        reasons=found,
        engine_account=s.account,
        engine_source=None,
        checkpoint_via=summary.via,
        warnings=list(summary.warnings)
        + list(summary.errors)
        + ([release.note] if release.older else []),
    )


def _planned_gpus(
    args: CapacityInput, choice: GpuChoice | None, inventory: GpuInventory
) -> PlannedGpus:
    """The GPUs asked for (the host's own figures when it has that very part), else the host's."""
    asked = choice.count if choice else None
    count = asked or args.tp * args.pp * args.dp
    host = _host_gpus(args.host, inventory) if inventory.gpus else None
    if choice is not None and host is not None and host.spec.key == choice.spec.key:
        source = f"gpus={args.gpus}, measured by nvidia-smi on {args.host}"
        return PlannedGpus(spec=host.spec, count=count, evidence=host.evidence, source=source)
    if choice is not None:
        gpu = choice.spec
        quote = f"{gpu.smi_name}: {gpu.memory_mib} MiB, compute capability {gpu.compute_capability}"
        return PlannedGpus(
            spec=gpu,
            count=count,
            evidence=Evidence(source=gpu.source, quote=quote),
            source=f"gpus={args.gpus} (built-in table)",
        )
    return host or _host_gpus(args.host, inventory)


def cpu_gpus(args: CapacityInput) -> PlannedGpus:
    """vLLM's CPU backend: no GPU; the KV cache gets VLLM_CPU_KVCACHE_SPACE GiB of RAM."""
    if args.engine != "vllm":
        raise ToolError("gpus=cpu plans for vLLM's CPU backend; pass engine=vllm")
    space = args.cpu_kv_space_gib
    spec = GpuSpec(
        key="CPU",
        smi_name="CPU (vLLM CPU backend)",
        memory_mib=space * 1024,
        compute_capability="0.0",
        source=f"VLLM_CPU_KVCACHE_SPACE={space} (cpu_kv_space_gib)",
        cuda_mib=space * 1024,
        sms=1,
    )
    where = f"gpus=cpu, VLLM_CPU_KVCACHE_SPACE={space} GiB"
    evidence = Evidence(source="vllm/platforms/cpu.py", quote="kv_cache_memory_bytes = "
                        "VLLM_CPU_KVCACHE_SPACE * GiB_bytes")  # fmt: skip
    return PlannedGpus(spec=spec, count=1, evidence=evidence, source=where)


def _host_gpus(host: str, inventory: GpuInventory) -> PlannedGpus:
    """The host's GPUs, as nvidia-smi reports the first of them."""
    if not inventory.gpus:
        raise ToolError(
            f"host {host!r} has no GPU that nvidia-smi reports; pass gpus=8xH200 (or another "
            "count x GPU) to plan for GPUs that are not there"
        )
    first = inventory.gpus[0]
    row = lookup(first.name)
    where = f"nvidia-smi on {host}"
    # nvidia-smi's total less what the driver reserves (the table row's difference).
    reserved = row.memory_mib - row.engine_memory_mib if row else 512
    spec = GpuSpec(
        key=row.key if row else first.name,
        smi_name=first.name,
        memory_mib=first.memory_total_mib,
        compute_capability=first.compute_capability,
        source=where,
        cuda_mib=first.memory_total_mib - reserved,
        sms=row.sms if row else 132,
        nvlink=row.nvlink if row else False,
    )
    evidence = Evidence(source=where, quote=gpu_line(first))
    return PlannedGpus(spec=spec, count=len(inventory.gpus), evidence=evidence, source=where)


def _read_config(sandboxed: SandboxedHost, model_dir: str) -> dict[str, Any]:
    path = sandboxed.resolve(posixpath.join(model_dir, "config.json"))  # a link stays in roots
    try:
        raw = read_whole(sandboxed.files, path, size=16 * 1024 * 1024)
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


def _rules_from(engine: str, applied: str) -> str:
    if engine == "vllm":
        return f"{rules.VLLM_VERSION}; accounting {applied}"
    older = {"sglang-0.4": rules.SG04_MEM_FRACTION, "sglang-0.4.7": rules.SG047_MEM_FRACTION}
    if applied in older:
        return f"{older[applied].source} (default fraction); {rules.SGLANG_VERSION}"
    return rules.SGLANG_VERSION
