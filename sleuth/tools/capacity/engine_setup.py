"""The settings an engine sizes its KV cache from, resolved the way the engine resolves them.

`EngineSetup` holds what the engine knows at start-up (its rules by version, the device's
memory as CUDA reports it, the memory fraction, the batch limits, the block size, the dtypes);
`resolve_setup` fills what the user did not say with the engine's own defaults, each cited.
The accounting (accounting.py) works on this alone, so a setup can also be built from a
published engine log (the comparison corpus) without a checkpoint.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from sleuth.tools.capacity.gpus import GpuSpec
from sleuth.tools.capacity.quant_rules import _version
from sleuth.tools.capacity.rules import GIB

VllmRules = Literal["v0", "v1-0.19", "v1-0.32"]
SglangRules = Literal["sglang-0.4", "sglang-0.4.7", "sglang-0.5"]
CommBuffers = Literal["nvswitch", "nccl", "rccl"]


class EngineSetup(BaseModel):
    engine: Literal["vllm", "sglang"]
    rules: str
    """vLLM: v0 | v1-0.19 | v1-0.32 (see `vllm_rules`); SGLang: sglang-0.4 | sglang-0.4.7 |
    sglang-0.5 (see `sglang_rules`)."""
    device: Literal["gpu", "cpu"] = "gpu"
    tp: int = 1
    pp: int = 1
    memory_bytes: int = 0
    """One GPU's total as the engine sees it (CUDA's total; 0 on CPU)."""
    smi_memory_mib: int = 0
    """nvidia-smi's memory.total (SGLang's default fraction reads it)."""
    sms: int = 132
    fraction: float
    """vLLM --gpu-memory-utilization or SGLang --mem-fraction-static."""
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    kv_elem: int
    """Bytes of one KV value (1 for fp8, 2 for bf16/fp16, 4 for fp32)."""
    act_elem: int
    """Bytes of one activation value (the model's dtype)."""
    enforce_eager: bool = False
    online_fp8: bool = False
    """`--quantization fp8` on an unquantised checkpoint: the weights are its linear layers'
    at 1 B as they load (only the weights term's text depends on it)."""
    cpu_kv_space_bytes: int = 0
    """vLLM CPU backend: VLLM_CPU_KVCACHE_SPACE GiB, the KV cache's whole budget."""
    draft_layers: int = 0
    max_capture_size: int = 512
    """The largest CUDA graph batch size vLLM captures."""
    capture_how: str = "vLLM's default min(max_num_seqs × 2, 512)"
    context_counted: bool = False
    """The release charged every non-torch byte on the device, the CUDA context too
    (`counts_context`)."""
    custom_all_reduce: bool = True
    """The engine runs custom all-reduce for the tp group (topology.py); its buffers count."""
    comm: CommBuffers = "nvswitch"
    """Which collective buffers the tp group allocates (topology.comm_buffers): NCCL on one
    NVSwitch node of Hopper/Blackwell GPUs, NCCL elsewhere, or RCCL on AMD."""
    links_why: str = ""
    """The topology rule's verdict, for the term's text."""


def vllm_rules(version: str | None, gpu: GpuSpec | None = None) -> VllmRules:
    """Which vLLM accounting a release follows.

    V1 became the default engine in 0.8.0, except where that release falls back to V0 on the
    GPU (`v0_fallback`); 0.21.0 started subtracting the profiled CUDA graph memory by default
    (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: "0" in 0.19.1's envs.py, "1" in 0.22.0's, the
    next release on PyPI) and the log line that reports capacity by max_model_len; without a
    version, the newest rules.
    """
    if not version:
        return "v1-0.32"
    parts = _version(version)
    if parts < (0, 8) or v0_fallback(version, gpu):
        return "v0"
    return "v1-0.19" if parts < (0, 21) else "v1-0.32"


V1_EVERYWHERE_FROM = (0, 10, 2)
V1_ON_ROCM_FROM = (0, 9, 2)


def v0_fallback(version: str, gpu: GpuSpec | None) -> str:
    """Why a V1-era release runs V0 on this GPU by default, or "" when it does not.

    vllm/engine/arg_utils.py _is_v1_supported_oracle, 0.8.0 to 0.10.1.1: "Compute Capability
    < 8.0" falls back to V0 on CUDA; 0.8.0 to 0.9.1 also fall back on any non-CUDA platform
    ("not_cuda", then "v0_hardware"), ROCm included; 0.9.2 asks the platform, and ROCm's
    default_v1 is supports_v1, True; 0.10.2 has no fallback left."""
    parts = _version(version)
    if gpu is None or not (0, 8) <= parts < V1_EVERYWHERE_FROM:
        return ""
    if gpu.rocm and parts < V1_ON_ROCM_FROM:
        return "this release runs V0 by default on ROCm (V1 was opt-in there before 0.9.2)"
    if not gpu.rocm and gpu.capability < 80:
        return (
            f"this release runs V0 on compute capability {gpu.compute_capability} ('Compute "
            "Capability < 8.0 is not supported by the V1 Engine. Falling back to V0.')"
        )
    return ""


CONTEXT_COUNTED = (((0, 6, 4), (0, 6, 5)), ((0, 8), (0, 9, 1)))
"""Releases whose profile charged all non-torch memory on the device, the CUDA context
included: V0 0.6.4.x worker/worker.py and V1 0.8.0 to 0.9.0 v1/worker/gpu_worker.py
determine_available_memory (peak_memory += total - free - torch's allocated bytes). 0.6.3
charged the free memory lost since init, 0.6.5 (vllm PR 10511) and 0.9.1 (PR 18974) measure
from a snapshot taken after the context was created; so does V0's worker.py in the V1-era
releases (0.8.2: memory_profiling from baseline_snapshot), where a release falls back to V0."""


def counts_context(version: str | None, v0: bool) -> bool:
    """Whether this vLLM release, run as V0 or V1, charged the CUDA context to the KV budget
    (CONTEXT_COUNTED); a pre-release of a range's first release (0.6.4.dev9) comes before
    it."""
    if not version or (v0 and _version(version) >= (0, 8)):
        return False
    release: list[int] = []
    for part in version.split("+")[0].split("."):
        if not part.isdigit():
            break
        release.append(int(part))
    pre = "dev" in version or "rc" in version
    return any(
        lo <= tuple(release) < hi and not (pre and tuple(release[: len(lo)]) == lo)
        for lo, hi in CONTEXT_COUNTED
    )


class EngineVersion(BaseModel):
    """Which release's rules a plan applied, and where that release was read."""

    version: str | None
    """The release, e.g. 0.10.1; None when neither the question nor the host gave one."""
    source: Literal["question", "host", "assumed"]
    """engine_version in the question, the engine installed on the host, or assumed newest."""
    rules: str
    """The accounting applied: vLLM v0 | v1-0.19 | v1-0.32, SGLang sglang-0.4 | sglang-0.4.7 |
    sglang-0.5."""
    older: bool = False
    """The release is older than the rules model faithfully (vLLM V0, SGLang before 0.5)."""
    note: str
    """One sentence for the answer; says plainly when the release is older than the rules."""


SGLANG_OLDEST = (0, 5)
"""SGLang's reserve rule (memory_hook.py reserved_mem) as modelled was read from 0.5.x."""
SGLANG_TP_TABLE_UNTIL = (0, 4, 5)
"""The last releases whose default --mem-fraction-static is the tensor-parallel table alone:
read in sglang 0.4.3.post4 and 0.4.4.post4 python/sglang/srt/server_args.py
ServerArgs.__post_init__; 0.4.5 gates the table on GPUs of at most 81920 MiB and 0.4.7.post1
replaced it with a reserve by GPU size."""
SGLANG_TIERS = ((0, 4, 7, 1), (0, 5, 3))
"""The releases whose default fraction reserves by GPU size (rules.sglang_047_mem_fraction):
read in 0.4.7.post1, 0.4.8.post1, 0.4.9.post6, 0.4.10.post2, 0.5.1 and 0.5.2; 0.4.7 still had
the table, 0.5.3 has the reserve 0.5.x is modelled with (512 MiB + chunked prefill x 1.5 + ...)."""


def sglang_rules(version: str | None) -> SglangRules:
    """Which SGLang accounting a release follows: the KV pool rule (profile_max_num_token:
    free memory after the load less (1 - fraction) x the free memory before it) reads the same
    in 0.4.3.post4 (model_runner.py), 0.5.1 (model_runner.py) and 0.5.10.post1
    (model_runner_kv_cache_mixin.py); the default fraction is what differs: sglang-0.4 before
    0.4.5, sglang-0.4.7 from 0.4.7.post1 to 0.5.2, sglang-0.5 otherwise (0.4.5 to 0.4.7 too,
    said to be older in the answer)."""
    if version and _version(version) < SGLANG_TP_TABLE_UNTIL:
        return "sglang-0.4"
    if version and SGLANG_TIERS[0] <= _version(version) < SGLANG_TIERS[1]:
        return "sglang-0.4.7"
    return "sglang-0.5"


def engine_version(
    engine: str, asked: str | None, installed: str | None, gpu: GpuSpec | None = None
) -> EngineVersion:
    """The release whose rules apply: the question's, else the host's, else the newest known."""
    version = asked or installed
    source: Literal["question", "host", "assumed"] = (
        "question" if asked else "host" if installed else "assumed"
    )
    where = {
        "question": "given in the question",
        "host": "installed on the host (python_env)",
        "assumed": "no version given and none found on the host: the newest rules assumed",
    }[source]
    if engine == "sglang":
        return _sglang_version(version, source, where)
    rules = vllm_rules(version, gpu)
    name = f"vllm {version}" if version else "vllm (version unknown)"
    fallback = v0_fallback(version, gpu) if version else ""
    note = (
        f"{name}, {where}; accounting {rules} applied"
        + (f": {fallback}" if fallback else "")
        + (
            "; this release charged the CUDA context to the KV budget too (its profile counted "
            "every non-torch byte on the device)"
            if counts_context(version, rules == "v0")
            else ""
        )
        + (
            (". " if fallback else ". This release predates the V1 engine (0.8): ")
            + "V0's profile of a full-length prefill is modelled only roughly (activation peak "
            "±100 %); treat the KV figures as a range"
            if rules == "v0"
            else ""
        )
    )
    return EngineVersion(
        version=version, source=source, rules=rules, older=rules == "v0", note=note
    )


def _sglang_version(
    version: str | None, source: Literal["question", "host", "assumed"], where: str
) -> EngineVersion:
    name = f"sglang {version}" if version else "sglang (version unknown)"
    rules = sglang_rules(version)
    old = bool(version) and _version(version or "") < SGLANG_OLDEST
    if rules == "sglang-0.4":
        what = (
            "; rules sglang-0.4 applied: the default --mem-fraction-static from that release's "
            "tensor-parallel table (0.88, 0.87 at tp 2, 0.85 at 4, 0.81 at 8, 0.79 at 16), the "
            "KV pool rule as in 0.5. Other 0.5.x terms (the memory in use before the load) "
            "were not read for it"
        )
    elif rules == "sglang-0.4.7":
        what = (
            "; rules sglang-0.4.7 applied: the default --mem-fraction-static from that "
            "release's reserve by GPU size (0.4.7.post1 to 0.5.2), the KV pool rule as in 0.5"
        )
    else:
        what = "; rules of sglang 0.5.x applied" + (
            ". This release is older than the rules Sleuth models (its default "
            "--mem-fraction-static was another rule): the KV figures may be off by more than "
            "the stated spread"
            if old
            else ""
        )
    return EngineVersion(
        version=version, source=source, rules=rules, older=old, note=f"{name}, {where}{what}"
    )


def default_batch(
    engine: str, device: str, memory_bytes: int, gpu_name: str, version: str | None = None
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) an engine picks when not told.

    vLLM EngineArgs' usage-context defaults for `vllm serve` (V1; V0's are `v0_batch`): from
    0.9.0 (to 0.19.0, get_batch_defaults) 8192 and 1024 on a GPU of 70 GiB or more that is not
    an A100, else 2048 and 256; 0.8.5 the same without the A100 exception; 0.8.0 to 0.8.4 8192
    on a GPU whose name holds "h100" or "h200", else 2048, with 1024 sequences (0.8.4: 256 off
    H100/H200). Without a version, the newest. On CPU 2048 and 128 (world size 1). SGLang's
    chunked-prefill size is its own rule (rules.sglang_mem_fraction).
    """
    if device == "cpu":
        return 2048, 128
    if engine != "vllm":
        return 2048, 256
    name, release = gpu_name.lower(), _version(version) if version else None
    if release and release < (0, 8, 5):
        hopper = "h100" in name or "h200" in name
        return (8192 if hopper else 2048), (1024 if hopper or release < (0, 8, 4) else 256)
    big = memory_bytes >= 70 * GIB
    if big and (bool(release and release < (0, 9)) or "a100" not in name):
        return 8192, 1024
    return 2048, 256


V0_CHUNK_512_UNTIL = (0, 6, 5)
"""vLLM V0's chunked-prefill batch default: 512 tokens in 0.5.3.post1 to 0.6.4.post1, 2048
from 0.6.5 (vllm/config.py SchedulerConfig)."""


V0_ROCM_UNCHUNKED_FROM = (0, 8, 0)
"""From 0.8.0 V0 turns long-context chunked prefill on only where `current_platform.is_cuda()`
(vllm/engine/arg_utils.py _set_default_args_v0), which is False on ROCm; up to 0.7.3 the test
was `device_config.device_type == "cuda"`, and ROCm's platform reports device_type "cuda"
(vllm/platforms/rocm.py)."""


def v0_batch(context: int, version: str | None, sliding: bool, rocm: bool) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM V0 profiles with when not told.

    V0 profile_run (worker/model_runner.py) runs scheduler_config.max_num_batched_tokens
    tokens over max_num_seqs (EngineArgs default 256) sequences. SchedulerConfig sets the
    tokens to max(max_model_len, 2048) without chunked prefill; EngineArgs.create_engine_config
    turns chunked prefill on past 32K tokens on CUDA (not for sliding-window models, nor with
    speculative decoding or LoRA; not on ROCm from 0.8.0), and the chunk is then 512 tokens
    before 0.6.5, 2048 after.
    """
    release = _version(version) if version else None
    unchunked_rocm = rocm and release is not None and release >= V0_ROCM_UNCHUNKED_FROM
    if context <= 32768 or sliding or unchunked_rocm:
        return max(context, 2048), 256
    return (512 if release and release < V0_CHUNK_512_UNTIL else 2048), 256


def capture_limit(asked: int | None, max_num_seqs: int, batched: int) -> tuple[int, str]:
    """vLLM's largest CUDA graph capture size (VllmConfig._set_cudagraph_sizes):
    --max-cudagraph-capture-size when given, else min(max_num_seqs × decode_query_len × 2,
    512), then at most max_num_batched_tokens (decode_query_len 1: no speculative tokens)."""
    if asked:
        return min(asked, batched), f"given: {asked}, at most max_num_batched_tokens {batched}"
    value = min(max_num_seqs * 2, 512, batched)
    return value, (f"min(max_num_seqs {max_num_seqs} × 2, 512, max_num_batched_tokens {batched})")


def default_block_size(engine: str, device: str, mla: bool) -> int:
    """vLLM: 16 on GPU (the attention backends' default), 128 on CPU and 16 for CPU MLA
    (vllm/platforms/cpu.py); SGLang pages one token at a time (page_size 1)."""
    if engine == "sglang":
        return 1
    if device == "cpu":
        return 16 if mla else 128
    return 16
