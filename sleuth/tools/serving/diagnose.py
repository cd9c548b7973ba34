"""Why a server launch failed, read from the engine's own log.

`diagnose(log_lines, ...)` returns a `Diagnosis`: the line that states the cause (the
headline), a `kind` from a fixed set, the log lines it rests on (quoted as logged), and the
fix that the engine's own message implies, with the numbers taken from that message.

The headline is the exception line that states the cause, never "Traceback (most recent call
last):" and never a wrapper that only points elsewhere (vLLM's "Engine core initialization
failed. See root cause above", pydantic's "1 validation error for ..."): when vLLM raises a
pydantic ValidationError, the cause is its "Value error, ..." line.

Each kind's patterns are the engines' own wording, with the public thread or source file that
shows it in tests/test_diagnose_corpus.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

FailureKind = Literal[
    "context_too_long",
    "kv_cache_too_small",
    "oom_weights",
    "oom_activation",
    "cuda_graph_capture",
    "unsupported_quantization",
    "unsupported_architecture",
    "model_not_found",
    "port_in_use",
    "engine_missing",
    "nccl",
    "other",
]


class Diagnosis(BaseModel):
    """A failed launch, explained. Sits under the launch result's `data.diagnosis`."""

    kind: FailureKind = Field(description="What went wrong, from a fixed set")
    headline: str = Field(description="The log line that states the cause, prefixes removed")
    evidence: list[str] = Field(description="Log lines the diagnosis rests on, as logged")
    fix: str = Field(description="What to change, with the numbers the engine logged")


# What engines put before a message: vLLM's "(EngineCore_DP0 pid=1) ERROR 11-05 12:19:32
# [core.py:708] ", torch's "[rank0]: ", SGLang's "[2025-03-10 14:17:52 TP1] ", Ray's
# "(RayWorkerVllm pid=5085) ". Stripped only to find and show the message; evidence keeps them.
_PREFIX = re.compile(
    r"^(?:\s*(?:\x1b\[[0-9;]*m)*(?:\([\w\-]+ (?:pid=\d+|rank=\d+ pid=\d+)\)"
    r"|\[rank\d+\]:|\[\d{4}-\d\d-\d\d [\d:]+(?: [A-Z]+\d+)*\]"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ (?:\[[\w.:]+\] )?"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:.]+ [\w.]+:\d+\]|\|)\s*)+"
)
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?::\s*(.*))?$"
)
_VALUE_ERROR = re.compile(r"^(?:Value|Assertion) error, (.*?)(?: \[type=\w+.*)?$")
# Exception lines that only point at the real cause elsewhere in the log.
_WRAPPERS = (
    "Engine core initialization failed",
    "See root cause above",
    "validation error for",
    "Engine process failed to start",
    "Initialization failed",
)

WEIGHTS_DONE = ("Model loading took", "Loading weights took", "Load weight end")
CAPTURE_BEGIN = (
    "Capture cuda graph begin",
    "Capturing CUDA graph",
    "capture_model",
    "Capturing batches",
)


def message(line: str) -> str:
    """A log line without the engine's prefixes (process, level, time, rank)."""
    return _PREFIX.sub("", line).strip()


def split_lines(text: str) -> list[str]:
    """Log text as a terminal shows it: `\\r\\n` ends a line; a lone `\\r` redraws it, so only
    what follows the last one stays (progress bars)."""
    lines = text.replace("\r\n", "\n").split("\n")
    return [line.rpartition("\r")[2] for line in lines]


@dataclass(frozen=True)
class _Rule:
    kind: FailureKind
    pattern: re.Pattern[str]
    fix: Callable[[dict[str, str], str], str]
    """Builds the fix from the pattern's named groups and the matched message."""


def _gib(text: str) -> str:
    return text.replace("GiB", " GiB").replace("  ", " ")


def _fix_context(g: dict[str, str], _: str) -> str:
    asked, derived = g["asked"], g["derived"]
    return (
        f"lower --max-model-len from {asked} to at most {derived}, the model's own limit "
        f"(config.json); a longer context needs RoPE scaling the model supports "
        f"(then VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)"
    )


def _fix_kv(g: dict[str, str], _: str) -> str:
    fits = g.get("fits") or g.get("fits2")
    return (
        f"lower --max-model-len to at most {fits} (what the KV cache holds), or give the KV "
        f"cache more memory (--gpu-memory-utilization on GPU, VLLM_CPU_KVCACHE_SPACE on CPU, "
        f"--mem-fraction-static for SGLang)"
    )


def _fix_kv_plain(g: dict[str, str], _: str) -> str:
    return (
        "give the KV cache more memory (raise --gpu-memory-utilization / --mem-fraction-static, "
        "or VLLM_CPU_KVCACHE_SPACE on CPU), or lower --max-model-len / --context-length"
    )


def _fix_oom(g: dict[str, str], msg: str) -> str:
    asked = g["asked"]
    free = re.search(r"of which ([\d.]+ ?[GMK]iB) is free", msg)
    need = f" (it asked for {_gib(asked)}" + (f", {_gib(free.group(1))} was free)" if free else ")")
    return f"the GPU ran out of memory{need}"


def _fix_quant(g: dict[str, str], _: str) -> str:
    need, have = g["need"], g["have"]
    return (
        f"this quantization needs compute capability {int(need) / 10:.1f} and the GPU has "
        f"{int(have) / 10:.1f}: use a GPU of capability {int(need) / 10:.1f} or newer, or a "
        f"checkpoint in a format this GPU runs"
    )


def _fix_text(text: str) -> Callable[[dict[str, str], str], str]:
    return lambda g, msg: text


_RULES: list[_Rule] = [
    _Rule(
        "engine_missing",
        re.compile(
            r"No module named '?(?P<mod>vllm|sglang)\b|PackageNotFoundError: No package metadata "
            r"was found for (?P<dist>vllm|sglang)|^sh: \d+: (?P<cmd>\S+): not found"
            r"|^sh: (?P<cmd2>\S+): (?:command )?not found|exec: (?P<cmd3>\S+): not found"
        ),
        _fix_text(
            "install the engine into the environment whose interpreter launches it, or point "
            "`python` at the engine environment's interpreter (e.g. /opt/vllm/bin/python)"
        ),
    ),
    _Rule(
        "port_in_use",
        re.compile(r"\[Errno 98\]|[Aa]ddress already in use"),
        _fix_text("pick a free port, or stop the server that holds this one"),
    ),
    _Rule(
        "model_not_found",
        re.compile(
            r"does not appear to have a file named config\.json|Invalid repository ID or local "
            r"directory|is not a local folder and is not a valid model identifier|Repo id must "
            r"|HFValidationError|Can't load the configuration of|No such file or directory: "
            r"'[^']*config\.json'|Unrecognized model in|should have a `model_type` key"
        ),
        _fix_text(
            "model_path must be a model folder with config.json, tokenizer files and weights "
            "(list_dir it to check), or a repo id the host can download"
        ),
    ),
    _Rule(
        "unsupported_architecture",
        re.compile(
            r"Model architectures? \[?.*\]? (?:are|is) not supported|does not recognize this "
            r"architecture|No model architectures are specified"
        ),
        _fix_text(
            "this engine version has no implementation of the checkpoint's architecture: use "
            "an engine release that lists it (its model registry), or a supported checkpoint"
        ),
    ),
    _Rule(
        "unsupported_quantization",
        re.compile(
            r"not supported for (?:the current GPU|', 'the current GPU)\.?.*?Min(?:imum)? "
            r"capability: (?P<need>\d+).*?Current capability: (?P<have>\d+)"
        ),
        _fix_quant,
    ),
    _Rule(
        "unsupported_quantization",
        re.compile(
            r"Unsupported FusedMoe scheme|quantization method \S+ is not supported"
            r"|Unknown quantization method"
        ),
        _fix_text(
            "this engine has no kernel for the checkpoint's quantization on this GPU: check "
            "quantization_config in config.json against the engine's supported methods"
        ),
    ),
    _Rule(
        "context_too_long",
        re.compile(
            r"User-specified max_model_len \((?P<asked>\d+)\) is greater than the derived "
            r"max_model_len \((?:\w+=)?(?P<derived>\d+)"
        ),
        _fix_context,
    ),
    _Rule(
        "context_too_long",
        re.compile(
            r"max_model_len \((?P<asked>\d+)\) (?:is )?greater than (?:the )?derived(?: "
            r"max_model_len)? \((?P<derived>\d+)"
        ),
        _fix_context,
    ),
    _Rule(
        "kv_cache_too_small",
        re.compile(
            r"estimated maximum model length is (?P<fits>\d+)|larger than the maximum number of "
            r"tokens that can be stored in KV cache \((?P<fits2>\d+)\)"
        ),
        _fix_kv,
    ),
    _Rule(
        "kv_cache_too_small",
        re.compile(
            r"No available memory for the cache blocks|KV cache is needed, which is larger "
            r"than the available KV cache memory|Not enough memory\. Please try to "
            r"increase --mem-fraction-static|KV cache memory.*?(?:is )?(?:not enough|insufficient)"
        ),
        _fix_kv_plain,
    ),
    _Rule(
        "cuda_graph_capture",
        re.compile(r"Capture cuda graph failed|operation not permitted when stream is capturing"),
        _fix_text(
            "CUDA graph capture failed: lower --cuda-graph-max-bs (SGLang) or the capture "
            "sizes, or run without graphs (--disable-cuda-graph / --enforce-eager) to see "
            "whether the model runs at all; the exception above names the inner cause"
        ),
    ),
    _Rule(
        "oom_weights",  # refined by phase in _oom_kind
        re.compile(r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<asked>[\d.]+ ?[GMK]iB)"),
        _fix_oom,
    ),
    _Rule(
        "oom_weights",
        re.compile(r"CUDA error: out of memory|OutOfMemoryError"),
        _fix_text("the GPU ran out of memory"),
    ),
    _Rule(
        "nccl",
        re.compile(
            r"Watchdog caught collective operation timeout|NCCL error|ProcessGroupNCCL.*"
            r"(?:timeout|Timeout|error)|ncclUnhandledCudaError|ncclSystemError|NCCL WARN"
        ),
        _fix_text(
            "the GPUs could not talk to each other: check `nvidia-smi topo -m`, set "
            "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the right interface, try "
            "--disable-custom-all-reduce, and rerun with NCCL_DEBUG=INFO to see which step hangs"
        ),
    ),
]


_OOM_FIX = {
    "oom_weights": (
        "; the weights alone do not fit: use more GPUs (--tensor-parallel-size / --tp-size), "
        "a smaller or quantized checkpoint, or lower --gpu-memory-utilization only if another "
        "process holds the GPU"
    ),
    "oom_activation": (
        "; the weights loaded but the profile or first batch did not fit: lower "
        "--max-num-batched-tokens / --chunked-prefill-size or --max-model-len, or lower "
        "--gpu-memory-utilization / --mem-fraction-static to leave more room for activations"
    ),
    "cuda_graph_capture": (
        " while capturing CUDA graphs: lower --cuda-graph-max-bs (SGLang) or "
        "max_cudagraph_capture_size (vLLM), lower the static memory fraction, or use "
        "--disable-cuda-graph / --enforce-eager"
    ),
}


def diagnose(lines: Sequence[str], *, exit_code: int | None = None) -> Diagnosis:
    """Explain a failed launch from its log lines (as `split_lines` gives them)."""
    shown = [line.rstrip() for line in lines if line.strip()]
    for rule in _RULES:
        for index in range(len(shown) - 1, -1, -1):
            msg = message(shown[index])
            found = rule.pattern.search(msg)
            if found is None:
                continue
            kind = rule.kind
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            fix = rule.fix(groups, msg)
            if kind == "oom_weights":
                kind = _oom_kind(shown[:index])
                fix += _OOM_FIX[kind]
            head_index = _cause_line(shown, index)
            return Diagnosis(
                kind=kind,
                headline=_headline(shown[head_index]),
                evidence=_evidence(shown, sorted({index, head_index})),
                fix=fix,
            )
    return _other(shown, exit_code)


def _oom_kind(before: list[str]) -> FailureKind:
    for line in reversed(before):
        if any(p in line for p in CAPTURE_BEGIN):
            return "cuda_graph_capture"
        if any(p in line for p in WEIGHTS_DONE):
            return "oom_activation"
    return "oom_weights"


def _cause_line(shown: list[str], index: int) -> int:
    """The matched line, or the exception line it continues when the message spans lines."""
    if _EXCEPTION.match(message(shown[index])) or _VALUE_ERROR.match(message(shown[index])):
        return index
    # A wrapped message (pydantic indents it; Python tuples split it) belongs to the
    # exception line just above it.
    for back in range(index - 1, max(index - 3, -1), -1):
        msg = message(shown[back])
        if _VALUE_ERROR.match(msg):
            return back
    return index


def _headline(line: str) -> str:
    msg = message(line)
    value = _VALUE_ERROR.match(msg)
    return (value.group(1) if value else msg)[:500]


def _evidence(shown: list[str], indexes: list[int]) -> list[str]:
    picked = list(indexes)
    for i, line in enumerate(shown):
        if any(p in line for p in WEIGHTS_DONE + CAPTURE_BEGIN) and i < max(indexes):
            picked.append(i)
    return [shown[i].strip()[:1000] for i in sorted(set(picked))][-6:]


def _other(shown: list[str], exit_code: int | None) -> Diagnosis:
    cause = _last_exception(shown)
    if cause is None:
        tail = shown[-1] if shown else "(the log is empty)"
        return Diagnosis(
            kind="other",
            headline=message(tail)[:500] if shown else tail,
            evidence=[line.strip()[:1000] for line in shown[-3:]],
            fix=(
                f"the process ended (exit code {exit_code}) without a recognised error; "
                "read the log tail"
                if exit_code is not None
                else "no recognised error in the log; read the log tail"
            ),
        )
    return Diagnosis(
        kind="other",
        headline=_headline(shown[cause]),
        evidence=[shown[cause].strip()[:1000]],
        fix="not a failure Sleuth knows; the headline is the engine's own exception",
    )


def _last_exception(shown: list[str]) -> int | None:
    wrapper = None
    for index in range(len(shown) - 1, -1, -1):
        msg = message(shown[index])
        if _VALUE_ERROR.match(msg):
            return index
        if not _EXCEPTION.match(msg) or msg.startswith("Traceback"):
            continue
        if any(w in msg for w in _WRAPPERS):
            wrapper = index if wrapper is None else wrapper
            continue
        return index
    return wrapper
