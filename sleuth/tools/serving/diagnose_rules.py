"""Which engine message means which failure: a table of patterns, most specific first.

Each pattern is the wording the engine (or torch, NCCL, transformers, the shell) prints, as
found in vLLM and SGLang sources and in the start-up logs of tests/fixtures/engine_logs. The
first rule whose pattern matches a line of the log decides the kind; `within` asks for a
second sign near that line (a traceback frame, a draft model) before the rule applies.
A rule matches only lines not logged at INFO or WARNING level, unless it says `quiet_ok`
(NCCL reports its errors as `NCCL WARN`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FailureKind = Literal[
    "context_too_long",
    "kv_cache_too_small",
    "oom_weights",
    "oom_activation",
    "cuda_graph_capture",
    "host_memory",
    "unsupported_quantization",
    "gpu_capability",
    "unsupported_architecture",
    "weights_missing",
    "tp_divisibility",
    "speculative_config",
    "bad_argument",
    "tokenizer_or_template",
    "driver_mismatch",
    "nccl",
    "port_in_use",
    "engine_missing",
    "trust_remote_code",
    "kernel_arch",
    "oom_serving",
    "illegal_memory_access",
    "nccl_timeout",
    "kv_exhaustion",
    "no_progress",
    "no_failure",
    "unknown",
]
Confidence = Literal["high", "low"]
Refine = Literal["oom_phase", "fault_site", "kv_pressure", "progress"]


@dataclass(frozen=True)
class Rule:
    kind: FailureKind
    pattern: re.Pattern[str]
    fix: str
    """Key of the fix builder (diagnose_fixes.FIXES)."""
    confidence: Confidence = "high"
    within: re.Pattern[str] | None = None
    """Must match a line near the hit (its traceback) for the rule to apply."""
    exceptions_only: bool = False
    quiet_ok: bool = False
    refine: Refine | None = None
    first: bool = False
    """Of equally strong lines, the first: where every rank repeats the failure in turn."""


def _rule(
    kind: FailureKind,
    pattern: str,
    fix: str,
    *,
    confidence: Confidence = "high",
    within: str | None = None,
    exceptions_only: bool = False,
    quiet_ok: bool = False,
    refine: Refine | None = None,
    first: bool = False,
) -> Rule:
    return Rule(
        kind,
        re.compile(pattern),
        fix,
        confidence,
        re.compile(within) if within else None,
        exceptions_only,
        quiet_ok,
        refine,
        first,
    )


SPECULATIVE_SIGNS = (
    r"spec_decode|/speculative/|eagle|Eagle|EAGLE|draft|Draft|[Mm]edusa|_mtp|MTP|[Nn]ext[Nn]"
)
# Where an engine validates its arguments: an exception raised here is an invalid option.
CONFIG_CHECKS = (
    r"in (?:check_and_update_config|check_\w*config|_?verify_\w+|check_server_args|"
    r"__post_init__|_check_\w+)$"
)

RULES: tuple[Rule, ...] = (
    # Ray's and the kernel's own memory reports come first: Ray's says "OutOfMemoryError" too.
    _rule(
        "host_memory",
        r"node running low on memory|ray\.exceptions\.OutOfMemoryError|\[Errno 12\] Cannot "
        r"allocate memory|std::bad_alloc|^MemoryError\b|cudaHostAlloc|pin_memory.*out of memory",
        "host_memory",
    ),
    _rule("port_in_use", r"\[Errno 98\]|[Aa]ddress already in use|EADDRINUSE", "port_in_use"),
    _rule(
        "engine_missing",
        r"No module named '?(?P<module>(?:vllm|sglang|sgl_kernel|vllm_\w+)\b[\w.]*)"
        r"|No package metadata was found for (?P<dist>vllm|sglang)"
        r"|^(?:sh|bash|/bin/sh|zsh): (?:line )?(?:\d+: )?(?P<cmd>[\w.\-/]+): (?:command )?not found"
        r"|exec: \"?(?P<cmd2>[^\":]+)\"?: (?:executable file )?not found",
        "engine_missing",
    ),
    # vllm/transformers_utils/config.py get_config (0.4-0.10): "Failed to load the model
    # config. If the model is a custom model not yet available in the HuggingFace
    # transformers library, consider setting `trust_remote_code=True`"; transformers'
    # dynamic_module_utils.resolve_trust_remote_code: "The repository for X contains custom
    # code which must be executed to correctly load the model" / "requires you to execute
    # the configuration file in that repo".
    _rule(
        "trust_remote_code",
        r"consider setting `?trust_remote_code=True|contains custom code which must be "
        r"executed|requires you to execute the (?:configuration|tokenizer|modeling) file"
        r"|set the option `trust_remote_code=True`|pass the argument `trust_remote_code=True`",
        "trust_remote_code",
    ),
    _rule(
        "driver_mismatch",
        r"NVIDIA driver on your system is too old(?: \(found version (?P<driver_cuda>\d+)\))?"
        r"|CUDA driver version is insufficient for CUDA runtime version"
        r"|PTX was compiled with an unsupported toolchain|forward compatibility was attempted"
        r"|undefined symbol: cu[A-Z]\w*|Found no NVIDIA driver on your system"
        r"|(?P<library>lib(?:cuda|cudart|cublas\w*|nvrtc|cudnn\w*|nvidia-ml)\.so[.\d]*): cannot "
        r"open shared object file"
        r"|with CUDA capability sm_(?P<gpu_sm>\d+) is not compatible with the current PyTorch",
        "driver",
    ),
    _rule(
        "gpu_capability",
        r"Bfloat16 is only supported on GPUs with compute capability of at least (?P<need>[\d.]+)"
        r"|only supports sm(?P<need_sm>\d+) and above"
        r"|not supported for (?:the current GPU|', 'the current GPU)\.?.*?Min(?:imum)? "
        r"capability: (?P<need_cc>\d+).*?Current capability: (?P<have_cc>\d+)"
        r"|FlashAttention only supports \w+ GPUs or newer"
        r"|fp8e4nv not supported in this architecture",
        "gpu_capability",
    ),
    # Kernels with no build for this GPU's architecture (new GPUs as much as old ones):
    # SGLang's FA3 backend, python/sglang/srt/layers/attention/attention_registry.py:108-112
    # (sglang commit 00a66eb); DeepGEMM's `Assertion error (csrc/...): Unsupported
    # architecture` / `Unknown recipe` (csrc/apis/gemm.hpp, utils/layout.hpp, quoted in
    # sgl-project/sglang#25877 and deepseek-ai/DeepGEMM#324); FlashMLA/TRT-LLM/sparse
    # kernels' "only supported on SM90a/SM100" checks.
    _rule(
        "kernel_arch",
        r"FlashAttention v3 Backend requires SM>=80 and SM<=90"
        r"|Assertion error \([^)]*\): (?:Unsupported architecture|Unknown recipe)"
        r"|(?:Kernel|kernel|backend|Backend) (?:is )?only supported on (?:SM|sm_?)\d+"
        r"|only supported on (?:Hopper|Blackwell)(?: GPUs)?\b",
        "kernel_arch",
    ),
    _rule(
        "kernel_arch",
        r"no kernel image is available for execution on the device",
        "kernel_arch",
        within=r"deep_gemm|DeepGEMM|flash_attn_3|_vllm_fa3_C|\bfa3\b|flashmla|trtllm|cutlass_mla",
    ),
    _rule(
        "nccl",
        r"Error while creating shared memory segment /dev/shm/\S+",
        "nccl_shm",
        quiet_ok=True,
    ),
    _rule("nccl", r"failed to extend /dev/shm/\S+", "nccl_shm", quiet_ok=True),
    _rule(
        "tp_divisibility",
        r"must be divisible by (?:tensor|pipeline) parallel size"
        r"|is not divisible by weight quantization block_[nk]"
        r"|not aligned with the quantized weight shape|too large tensor parallel size"
        r"|^assert .*%\s*(?:self\.)?(?:\w*tp_size|tp|tensor_parallel_size|world_size)\b.*== 0",
        "tp_divisibility",
    ),
    _rule(
        "speculative_config",
        r"(?i)\b(?:speculative|draft[ _]model|draft|eagle\d?|medusa|n_predict|nextn|mtp)\b",
        "speculative",
        exceptions_only=True,
    ),
    _rule(
        "speculative_config",
        r"shapes cannot be multiplied|must match the existing size|size mismatch for"
        r"|The size of tensor a \(\d+\) must match",
        "speculative",
        within=SPECULATIVE_SIGNS,
    ),
    # A weight the draft's checkpoint has and the class it was loaded as does not (an EAGLE3
    # draft's `midlayer.*` under the target's class; an embedding the draft shares): the
    # loader's own `params_dict[name]` KeyError (sglang/srt/models/*.py load_weights).
    _rule(
        "speculative_config",
        r"(?i)^KeyError: '[\w.]*(?:midlayer|eagle|draft|mtp|nextn)[\w.]*'$",
        "speculative",
        exceptions_only=True,
    ),
    _rule(
        "speculative_config",
        r"^KeyError: '[\w.]+\.weight'$",
        "speculative",
        within=SPECULATIVE_SIGNS,
    ),
    _rule(
        "unsupported_quantization",
        r"is not supported for quantization method|Quantization method specified in the model "
        r"config \(\w+\) does not match|Unknown quantization method|quantization method \S+ is "
        r"not supported|Unsupported FusedMoe scheme|Please install \S+ .*quantiz"
        r"|Cannot find the config file for \w+"
        # vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py:414,
        # _get_scheme_from_parts (vLLM 0.9.x, the line vllm-project/vllm#19853's traceback
        # shows; SGLang carries a copy): a scheme (bits, strategy, layer type) the installed
        # version has no kernel for, e.g. NVFP4 before it was added.
        r"|No compressed-tensors compatible scheme was found",
        "quantization",
    ),
    _rule(
        "unsupported_architecture",
        r"Model architectures? \[.*\] (?:are|is) not supported|Unsupported architectures?: "
        r"|does not recognize this architecture|No model architectures are specified",
        "architecture",
    ),
    _rule(
        "unsupported_architecture",
        r"^KeyError: '[\w\-]+'$",
        "architecture",
        within=r"configuration_auto\.py|CONFIG_MAPPING",
    ),
    _rule(
        "tokenizer_or_template",
        r"chat_template is not set|default chat template is no longer allowed|to build an "
        r"AutoTokenizer|Can't load tokenizer|Couldn't instantiate the backend tokenizer|Tokenizer "
        r"class \S+ does not exist|TemplateSyntaxError|untagged enum ModelWrapper",
        "tokenizer",
    ),
    _rule(
        "weights_missing",
        r"does not appear to have a file named|is not a local folder and is not a valid model "
        r"identifier|Repo id must be in the form|Invalid repository ID or local directory"
        r"|Incorrect path_or_model_id|No such file or directory: '[^']*"
        r"(?:config\.json|\.safetensors|\.bin)'"
        r"|Error while deserializing header|SafetensorError|Cannot find any model weights"
        r"|Unrecognized model in|should have a `model_type` key|Can't load the configuration of"
        r"|LocalEntryNotFoundError",
        "weights_missing",
    ),
    _rule(
        "weights_missing",
        r"gated repo|GatedRepoError|RepositoryNotFoundError|401 Client Error",
        "weights_access",
        confidence="low",
    ),
    _rule(
        "context_too_long",
        r"User-specified (?:max_model_len|context_length) \((?P<asked>[\d,]+)\) is greater than "
        r"(?:the )?derived (?:max_model_len|context_length) \((?:[^()=]*=)?(?P<derived>[\d,]+)",
        "context",
    ),
    _rule(
        "kv_cache_too_small",
        r"larger than the maximum number of tokens that can be stored in KV cache"
        r"|To serve at least one request with the models?'s max seq len"
        r"|KV cache is needed, which is larger than the available KV cache memory"
        r"|No available memory for the cache blocks"
        r"|Not enough memory\. Please try to increase --mem-fraction-static",
        "kv_cache",
    ),
    _rule(
        "bad_argument",
        r"error: unrecognized arguments?|error: argument \S+: |error: the following arguments "
        r"are required|invalid literal for int\(\) with base 10: '(?:tcp|udp)://"
        r"|got an unexpected keyword argument",
        "argument",
    ),
    _rule(
        "bad_argument",
        r"cannot be interpreted as an integer|invalid literal for int\(\)",
        "argument",
        within=r"in (?:get_open_port|bind|_get_port|\w*port\w*)$|envs\.py",
    ),
    # A build without kernels for this GPU: a GPU newer than the build (driver/toolkit), or
    # one older than a kernel library supports (capability). The log alone rarely says which.
    _rule(
        "driver_mismatch",
        r"no kernel image is available for execution on the device",
        "kernel_image",
        confidence="low",
    ),
    _rule(
        "cuda_graph_capture",
        r"Capture cuda graph failed|CUDA graph capture failed|operation not permitted when "
        r"stream is capturing|cudaErrorStreamCapture\w+|operation failed due to a previous "
        r"error during capture",
        "capture",
    ),
    _rule(
        "oom_weights",
        r"Free memory on device .* is less than desired GPU memory utilization",
        "gpu_busy",
        confidence="low",
    ),
    # Pinned (page-locked) host memory runs out before GPU memory does, under WSL above all,
    # and CUDA reports it as its own out-of-memory error.
    _rule(
        "host_memory",
        r"CUDA error: out of memory|cudaErrorMemoryAllocation",
        "host_memory",
        within=r"pin_memory|allocate_cpu_cache|cpu_offload|pinned",
    ),
    _rule(
        "oom_weights",
        r"(?:CUDA|HIP|XPU|NPU) out of memory|CUDA error: out of memory"
        r"|torch(?:\.cuda)?\.OutOfMemoryError|cudaErrorMemoryAllocation",
        "gpu_oom",
        refine="oom_phase",
    ),
    # Failures of a server that ran: an illegal access first (it also kills NCCL's watchdog
    # and hangs the other ranks), then a collective that timed out, a scheduler that stopped,
    # and requests retracted for KV cache. CUDA reports an illegal access asynchronously, so
    # the traceback is only sure where a device-side assertion names the kernel.
    _rule(
        "illegal_memory_access",
        r"an illegal memory access was encountered|device-side assert triggered"
        r"|misaligned address|an illegal instruction was encountered|unspecified launch failure",
        "illegal_memory_access",
        refine="fault_site",
    ),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout (torch 2.x).
    _rule(
        "nccl_timeout",
        r"Watchdog caught collective operation timeout",
        "nccl_timeout",
        quiet_ok=True,
        first=True,
    ),
    # sglang/srt/managers/scheduler.py, Scheduler.watchdog_thread (0.4.x): "Watchdog timeout
    # (self.watchdog_timeout=300)"; vllm/distributed/device_communicators/shm_broadcast.py
    # (0.6-0.11): "No available shared memory broadcast block found in 60 second(s)".
    _rule(
        "no_progress",
        r"Watchdog timeout \(self\.watchdog_timeout=\d+|No available shared memory broadcast "
        r"block found in \d+ seconds?",
        "no_progress",
        quiet_ok=True,
        first=True,
        refine="progress",
    ),
    # sglang/srt/managers/scheduler.py update_running_batch: "KV cache pool is full. Retract
    # requests."; schedule_batch.py retract_decode: "No space left for only one request";
    # vllm/core/scheduler.py _preempt (V0, v0.6.6): "Sequence group X is preempted by
    # PreemptionMode.RECOMPUTE mode ...", logged on the 1st, 51st, 101st... preemption; early
    # V1 (vllm/v1/core/scheduler.py): "request X is preempted by RECOMPUTE mode ...".
    _rule(
        "kv_exhaustion",
        r"KV cache pool is full\. Retract requests|No space left for only one request"
        r"|is preempted by (?:PreemptionMode\.)?\w+ mode because there is not enough KV cache",
        "kv_exhaustion",
        quiet_ok=True,
        first=True,
        refine="kv_pressure",
    ),
    _rule(
        "nccl",
        r"NCCL error|nccl(?:System|UnhandledCuda|Internal|InvalidUsage|Remote)Error",
        "nccl",
    ),
    # Messages that say something broke without saying why: reported as unknown.
    _rule(
        "unknown",
        r"Fatal Python error|Segmentation fault|SIGSEGV|SIGBUS|failed to be inspected|Error 802",
        "unknown",
        confidence="low",
    ),
    _rule(
        "bad_argument",
        r"^(?:Value|Assertion) error, ",
        "argument_checked",
        confidence="low",
    ),
    _rule(
        "bad_argument",
        r"^(?:[\w.]+\.)?(?:ValueError|NotImplementedError|TypeError|AssertionError): \S",
        "argument_checked",
        confidence="low",
        within=CONFIG_CHECKS,
        exceptions_only=True,
    ),
)
