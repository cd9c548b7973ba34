"""Preflight checks on the model: its folder and shards, how it splits over the GPUs, the
context it allows, its draft, its architecture, its quantisation and whether it fits.

Each check returns a `PreflightCheck`; a failing one carries the launch-failure kind the
engine would have died with, and the rule it follows: the installed engine's own line
(`host:file:line`) when the sandbox can read it, else the engine message it mirrors.
"""

from __future__ import annotations

import posixpath
from typing import Any, Literal

from pydantic import BaseModel

from sleuth.hosts.host import HostError
from sleuth.tools.capacity import rules
from sleuth.tools.capacity.model import ModelConfigError, ModelShape, model_shape
from sleuth.tools.capacity.online_quant import online_fp8
from sleuth.tools.capacity.sizing import declared_method
from sleuth.tools.capacity.weights import weights_per_gpu
from sleuth.tools.results import ToolError
from sleuth.tools.serving.diagnose_rules import Confidence, FailureKind
from sleuth.tools.serving.preflight_facts import Facts, cite, read_json

Status = Literal["pass", "fail", "warn", "skip"]
MIB = 1 << 20
# vLLM's ModelConfig derives max_model_len from the smallest of these config keys
# (vllm/config.py _get_and_verify_max_len, possible_keys).
CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
LONG_CONTEXT_ENV = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
FOLDER_FIX = (
    "model_path must be a model folder with config.json, tokenizer files and weights "
    "(list_dir it to check)"
)


class PreflightCheck(BaseModel):
    name: str
    status: Status
    detail: str
    kind: FailureKind | None = None
    """The launch-failure kind a failing check stands for."""
    confidence: Confidence = "high"
    rule: str | None = None
    """The engine's rule it follows: `host:file:line: text`, or the message it mirrors."""
    fix: str | None = None


def passed(name: str, detail: str, rule: str | None = None) -> PreflightCheck:
    return PreflightCheck(name=name, status="pass", detail=detail, rule=rule)


def skipped(name: str, why: str) -> PreflightCheck:
    return PreflightCheck(name=name, status="skip", detail=why)


def failed(
    name: str,
    kind: FailureKind,
    detail: str,
    fix: str,
    rule: str | None = None,
    confidence: Confidence = "high",
) -> PreflightCheck:
    return PreflightCheck(
        name=name,
        status="fail",
        detail=detail,
        kind=kind,
        confidence=confidence,
        rule=rule,
        fix=fix,
    )


def shape_of(facts: Facts) -> ModelShape | None:
    try:
        return model_shape(facts.config) if facts.config else None
    except ModelConfigError:
        return None


def model_checks(facts: Facts) -> list[PreflightCheck]:
    if facts.args.engine == "command":
        return []
    checks = [_folder(facts)]
    if facts.config is None:
        return checks
    shape = shape_of(facts)
    return [
        *checks,
        _shards(facts),
        _heads(facts, shape),
        _quant_group(facts, shape),
        _context(facts),
        *_draft(facts),
        _architecture(facts),
        _quant_dtype(facts),
        _quant_package(facts),
        _weights_fit(facts, shape),
        _chat_template(facts),
    ]


def _folder(facts: Facts) -> PreflightCheck:
    if "model_dir" in facts.errors:
        return failed("model_folder", "weights_missing", facts.errors["model_dir"], FOLDER_FIX)
    if facts.config is None:
        why = facts.errors.get("config", "no config.json")
        return failed("model_folder", "weights_missing", f"{facts.model_dir}: {why}", FOLDER_FIX)
    return passed("model_folder", f"{facts.model_dir} holds config.json")


def _shards(facts: Facts) -> PreflightCheck:
    s = facts.summary
    if s is None:
        why = facts.errors.get("summary", "the shard headers were not read")
        return failed("shards", "weights_missing", why, FOLDER_FIX)
    bad = s.consistency.shards_missing or s.shards.invalid or not s.shards.count
    if bad:
        detail = (
            f"{s.shards.count} shard(s): {len(s.consistency.shards_missing)} named by the "
            f"index but missing, {s.shards.invalid} unreadable or truncated"
            + (f"; {s.errors[0]}" if s.errors else "")
        )
        return failed(
            "shards",
            "weights_missing",
            detail,
            "download the missing or truncated shards again (the index names each file); "
            "checkpoint_summary lists every shard's state",
        )
    return passed(
        "shards", f"all {s.shards.count} shard(s) present, each as long as its header declares"
    )


def _heads(facts: Facts, shape: ModelShape | None) -> PreflightCheck:
    st = facts.settings
    if shape is None:
        return skipped("heads_divisible_by_tp", "config.json has no attention shape")
    problems = []
    if shape.attention_heads % st.tp:
        problems.append(f"{shape.attention_heads} attention heads")
    kv = shape.kv_heads
    if not shape.mla and kv % st.tp and st.tp % kv:
        problems.append(f"{kv} KV heads")
    if shape.experts and st.ep > 1 and shape.experts % st.ep:
        problems.append(f"{shape.experts} experts over ep {st.ep}")
    needle = "must be divisible by tensor parallel size" if st.engine == "vllm" else "% tp_size"
    files = ("config.py", "config/model.py") if st.engine == "vllm" else ("srt/models/llama.py",)
    rule = cite(facts, files, needle) or (
        "vLLM: 'Total number of attention heads (H) must be divisible by tensor parallel "
        "size (T).'; SGLang models: 'assert self.total_num_heads % tp_size == 0'"
    )
    if problems:
        fits = [
            str(d) for d in range(1, shape.attention_heads + 1) if shape.attention_heads % d == 0
        ]
        return failed(
            "heads_divisible_by_tp",
            "tp_divisibility",
            f"{' and '.join(problems)} do not split evenly over tp {st.tp}",
            f"use a tensor-parallel size that divides {shape.attention_heads} "
            f"({', '.join(fits[:10])})",
            rule,
        )
    return passed("heads_divisible_by_tp", f"{shape.attention_heads} heads ÷ tp {st.tp}", rule)


def _quant_group(facts: Facts, shape: ModelShape | None) -> PreflightCheck:
    q = facts.summary.quantization if facts.summary else None
    st = facts.settings
    if shape is None or q is None or st.tp == 1:
        return skipped("quant_group_divisible", "no block- or group-quantised weights to split")
    if q.weight_block_size:
        group, what = int(q.weight_block_size[-1]), "FP8 block"
        needle = "is not divisible by weight quantization block"
    elif q.group_size and q.group_size > 0:
        group, what = int(q.group_size), f"{q.method or 'quantisation'} group"
        needle = "not aligned with the quantized weight shape"
    else:
        return skipped("quant_group_divisible", "the quantisation has no block or group size")
    sizes = [("intermediate_size", shape.intermediate_size)]
    if shape.experts and st.ep == 1:
        sizes.append(("moe_intermediate_size", shape.moe_intermediate_size))
    rule = cite(facts, ("model_executor/layers/quantization/utils/fp8_utils.py",
                        "model_executor/layers/quantization/gptq.py"), needle) or (
        f"vLLM: '... {needle} ...' when a weight's slice per GPU is not whole blocks"
    )  # fmt: skip
    for key, size in sizes:
        if isinstance(size, int) and (size % st.tp or (size // st.tp) % group):
            part = size / st.tp
            return failed(
                "quant_group_divisible",
                "tp_divisibility",
                f"{key} {size} ÷ tp {st.tp} = {part:g} per GPU, not a multiple of the {what} "
                f"{group}",
                f"use a smaller tensor-parallel size so {key} ÷ tp stays a multiple of {group} "
                f"(or expert parallelism for MoE layers)",
                rule,
            )
    return passed("quant_group_divisible", f"every slice per GPU is whole {what}s of {group}", rule)


def derived_context(config: dict[str, Any]) -> tuple[int | None, str]:
    """The engine's own limit: the smallest context key, times a RoPE scaling factor."""
    text = config.get("text_config")
    scope: dict[str, Any] = text if isinstance(text, dict) else config
    found = {k: scope[k] for k in CONTEXT_KEYS if isinstance(scope.get(k), int)}
    if not found:
        return None, "config.json states no context length"
    key = min(found, key=lambda k: found[k])
    base = found[key]
    rope = scope.get("rope_scaling") or {}
    factor = rope.get("factor") if isinstance(rope, dict) else None
    kind = str(rope.get("rope_type") or rope.get("type") or "") if isinstance(rope, dict) else ""
    if isinstance(factor, (int, float)) and factor > 1 and kind in ("yarn", "dynamic", "linear"):
        original = rope.get("original_max_position_embeddings") or base
        return int(original * factor), f"{key}={base}, rope {kind} × {factor}"
    return base, f"{key}={base}"


def _context(facts: Facts) -> PreflightCheck:
    asked = facts.settings.context
    limit, how = derived_context(facts.config or {})
    if asked is None or limit is None:
        return passed("context_within_model", f"the engine takes the model's own limit ({how})")
    allowed = any(facts.args.env.get(name) == "1" for name in LONG_CONTEXT_ENV)
    rule = (
        "vLLM: 'User-specified max_model_len (A) is greater than the derived max_model_len "
        "(B)'; SGLang: 'User-specified context_length (A) is greater than the derived "
        "context_length (B)'"
    )
    if asked > limit and not allowed:
        return failed(
            "context_within_model",
            "context_too_long",
            f"context {asked:,} is more than the model's limit {limit:,} ({how} in config.json)",
            f"lower the context to at most {limit}; a longer one needs RoPE scaling the model "
            f"supports (rope_scaling) and VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 / "
            f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
            rule,
        )
    return passed("context_within_model", f"context {asked:,} within {limit:,} ({how})", rule)


def _draft(facts: Facts) -> list[PreflightCheck]:
    spec, draft, target = facts.args.speculative, facts.draft_config, facts.config or {}
    if spec is None or spec.draft_model_path is None:
        return []
    if draft is None:
        why = facts.errors.get("draft", "no config.json")
        return [failed("draft_model", "speculative_config", f"the draft model: {why}", FOLDER_FIX)]
    out = []
    for key, eagle_only in (("hidden_size", True), ("vocab_size", False)):
        mine, theirs = draft.get(key), target.get(key)
        if eagle_only and spec.algorithm not in ("EAGLE", "EAGLE3"):
            continue
        if isinstance(mine, int) and isinstance(theirs, int) and mine != theirs:
            out.append(failed(
                f"draft_{key}",
                "speculative_config",
                f"the draft's {key} {mine} differs from the target's {theirs}",
                "use a draft trained for this target (EAGLE heads take the target's hidden "
                "states; every draft shares its vocabulary)",
                "EAGLE drafts read the target's hidden states, so their hidden_size must match",
            ))  # fmt: skip
    limit, _ = derived_context(draft)
    wanted = facts.settings.context or derived_context(target)[0]
    if limit and wanted and limit < wanted:
        out.append(failed(
            "draft_context",
            "speculative_config",
            f"the draft's context limit {limit:,} is below the served context {wanted:,}",
            f"lower the context to at most {limit}, or use a draft trained for longer inputs",
            confidence="low",
        ))  # fmt: skip
    return out or [passed("draft_model", "the draft matches the target's hidden size and vocab")]


def _architecture(facts: Facts) -> PreflightCheck:
    archs = (facts.config or {}).get("architectures") or []
    root = facts.engine_source
    if not archs or root is None:
        return skipped("architecture_supported", "the engine's model registry is not readable")
    arch = str(archs[0])
    models = posixpath.join(root, "srt/models" if facts.settings.engine == "sglang" else
                            "model_executor/models")  # fmt: skip
    try:
        run = facts.host.run(["grep", "-rlwF", "--include=*.py", "--", arch, models], timeout=10)
    except HostError as exc:
        return skipped("architecture_supported", f"grep failed: {exc}")
    if run.exit_code == 0:
        first = run.stdout.decode(errors="replace").splitlines()[0]
        return passed("architecture_supported", f"{arch} is in the engine's models", first)
    fallback = facts.host.host.stat(posixpath.join(models, "transformers.py")).kind == "file"
    return failed(
        "architecture_supported",
        "unsupported_architecture",
        f"{arch} (config.json architectures) appears nowhere in {models}",
        "use an engine release that implements this architecture, or a checkpoint of one it "
        "does" + (" (or its Transformers backend, if transformers knows the model)" if fallback
                  else ""),
        f"the engine's registry: grep -rlw {arch} {models} found nothing",
        confidence="low" if fallback else "high",
    )  # fmt: skip


def quant_method(facts: Facts) -> str | None:
    """The engine's name for the quantisation (as given on the command line, else the one the
    checkpoint declares), as its capability rules are keyed."""
    return facts.settings.quantization or _declared(facts)


def _declared(facts: Facts) -> str | None:
    """The engine's name for the quantization the checkpoint itself declares."""
    engine: rules.Engine = "sglang" if facts.settings.engine == "sglang" else "vllm"
    return declared_method(facts.summary, engine) if facts.summary else None


def effective_dtype(facts: Facts) -> str:
    dtype = facts.settings.dtype
    if dtype in ("auto", ""):
        return str((facts.config or {}).get("torch_dtype") or "auto").lower()
    return {"bf16": "bfloat16", "half": "float16", "fp16": "float16"}.get(dtype, dtype)


def _quant_dtype(facts: Facts) -> PreflightCheck:
    method = quant_method(facts)
    cc = min((float(g.compute_capability) for g in facts.gpus), default=None)
    # vLLM runs AWQ checkpoints through awq_marlin (bf16 and fp16) on 8.0+ unless told awq.
    plain_awq = method == "awq" and (facts.settings.quantization == "awq" or (cc or 9) < 8.0)
    if plain_awq and effective_dtype(facts) == "bfloat16":
        return failed(
            "quantization_dtype",
            "unsupported_quantization",
            "AWQ runs in float16 only and the launch would run in bfloat16",
            "pass --dtype float16 (or let vLLM pick awq_marlin on an 8.0+ GPU)",
            cite(facts, ("model_executor/layers/quantization/awq.py",), "torch.half")
            or "vLLM AWQConfig.get_supported_act_dtypes: [torch.half]",
        )
    return passed(
        "quantization_dtype", f"{method or 'no quantisation'} with {effective_dtype(facts)}"
    )


def _quant_package(facts: Facts) -> PreflightCheck:
    if quant_method(facts) != "bitsandbytes" or facts.probe is None:
        return skipped("quantization_package", "no quantisation package needed")
    pkg = facts.probe.packages.get("bitsandbytes")
    if pkg is None or not pkg.installed:
        return failed(
            "quantization_package",
            "unsupported_quantization",
            f"the checkpoint is bitsandbytes-quantised and {facts.probe.python} has no "
            "bitsandbytes",
            f"install bitsandbytes>=0.44.0 into the environment of {facts.probe.python}",
            "vLLM/SGLang: 'Please install bitsandbytes>=0.44.0 ... to use bitsandbytes quantizer'",
        )
    return passed("quantization_package", f"bitsandbytes {pkg.version} is installed")


def _weights_fit(facts: Facts, shape: ModelShape | None) -> PreflightCheck:
    s, st = facts.summary, facts.settings
    if not facts.gpus or s is None or shape is None:
        return skipped("weights_fit", "no GPU or no weight map to size")
    share = weights_per_gpu(
        s,
        tp=st.tp,
        pp=st.pp,
        ep=st.ep,
        kv_heads=shape.kv_heads,
        with_mtp=facts.args.speculative is not None,
        online_fp8=online_fp8(st.quantization, _declared(facts)),
    )
    gpu = min(facts.gpus, key=lambda g: g.memory_total_mib)
    total = gpu.memory_total_mib * MIB
    fraction = st.mem_fraction or (
        rules.sglang_mem_fraction(gpu.memory_total_mib, st.tp, st.pp, shape.mla).value
        if st.engine == "sglang"
        else rules.vllm_mem_fraction().value
    )
    need = f"{share.bytes_per_gpu / 2**30:.2f} GiB of weights per GPU (tp {st.tp}, pp {st.pp}" + (
        ", linear layers as FP8: --quantization fp8)" if share.fp8_tensors else ")"
    )
    budget = total * fraction / 2**30
    have = f"{gpu.name} has {gpu.memory_total_mib:,} MiB, × {fraction} = {budget:.2f} GiB"
    if share.bytes_per_gpu > total * fraction:
        return failed(
            "weights_fit",
            "oom_weights",
            f"{need}; {have}",
            "use more GPUs (tensor or pipeline parallel) or a smaller or quantised checkpoint",
            "capacity rules: the shard headers' bytes, sharded as the engines shard them",
            confidence="high" if share.bytes_per_gpu > total else "low",
        )
    return passed("weights_fit", f"{need}; {have}")


def _chat_template(facts: Facts) -> PreflightCheck:
    if facts.settings.chat_template or facts.model_dir is None:
        return skipped("chat_template", "a chat template is given on the command line")
    try:
        tok = read_json(facts.host, posixpath.join(facts.model_dir, "tokenizer_config.json"))
    except (ToolError, HostError, ValueError):
        tok = {}
    files = ("chat_template.jinja", "chat_template.json")
    model_dir = facts.model_dir
    own = any(facts.host.files.stat(posixpath.join(model_dir, f)).kind == "file" for f in files)
    if tok.get("chat_template") or own:
        return passed("chat_template", "the tokenizer carries a chat template")
    return failed(
        "chat_template",
        "tokenizer_or_template",
        "the tokenizer has no chat template: /v1/chat/completions requests will fail",
        "pass --chat-template with a template file, or serve /v1/completions only",
        "transformers: 'Cannot use chat template functions because tokenizer.chat_template is "
        "not set'",
        confidence="low",
    )
