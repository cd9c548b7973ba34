"""What a fix is written from: the numbers an engine log states, and the engine's flags.

`numbers_near` reads the numbers a message states (its own line and the lines it wraps onto);
`numbers_in_log` the launch settings the log states anywhere (an args dump, a warning); `flag`
names an engine's own option for a setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Engine = Literal["vllm", "sglang"]

_SIZE = r"[\d.]+ ?[GMK]i?B"
_NEAR: dict[str, str] = {
    "tried": rf"Tried to allocate ({_SIZE})",
    "gpu_total": rf"total capac\w* of ({_SIZE})",
    "gpu_free": rf"of which ({_SIZE}) (?:is )?free",
    "max_model_len": r"max seq len \(([\d,]+)\)",
    "kv_cache_tokens": r"stored in KV cache \(([\d,]+)\)",
    "kv_needed": r"([\d.]+ ?GiB) KV cach",
    "kv_available": r"available KV cache memory \(([\d.]+ ?GiB)\)",
    "kv_fits": r"estimated maximum model length is ([\d,]+)",
    "asked": r"User-specified \w+ \(([\d,]+)\)",
    "derived": r"derived \w+ \((?:[^()=]*=)?([\d,]+)",
    "need_capability": r"(?:capability of at least|Min(?:imum)? capability:) (\d+(?:\.\d+)?)",
    "gpu_capability": r"(?:GPU has compute capability|Current capability:) (\d+(?:\.\d+)?)",
    "gpu_name": r"Your (.+?) GPU has compute capability",
    "need_sm": r"only supports sm(\d+)",
    "gpu_sm": r"CUDA capability sm_(\d+)",
    "port": r"bind on address \([^,]+, (\d+)|port (\d+) is (?:already )?in use",
    "shm_bytes": r"/dev/shm/\S+ (?:\(size (\d+)\)|to (\d+) bytes)",
    "driver_cuda": r"found version (\d+)",
    "library": r"(lib[\w\-]+\.so[.\d]*): cannot open",
    "module": r"No module named '?([\w.]+)",
    "heads": r"attention heads \((\d+)\) must be divisible",
    "tp_size": r"tensor parallel size \((\d+)\)",
    "slice": r"= (\d+) is not divisible by weight quantization",
    "block": r"quantization block_[nk] = (\d+)",
    "architecture": r"architectures? \[?'?(\w+)",
    "dtype": r"(torch\.\w+) is not supported for quantization method",
    "method": r"quantization method (\w+)\. Supported|model config \((\w+)\)",
    "dtypes": r"Supported dtypes: (\[[^\]]*\])",
    "quant_arg": r"`quantization` argument \((\w+)\)",
    "requirement": r"Please install (\S+)",
    "arguments": r"unrecognized arguments?: (.+)$",
    "option": r"argument (--[\w\-]+): invalid",
    "value": r"invalid \w+(?: value)?: '([^']*)'",
    "choices": r"\(choose from (.+)\)",
    "shared_memory": r"shared memory, Required: (\d+), Hardware limit: (\d+)",
    "hardware_limit": r"shared memory, Required: \d+, Hardware limit: (\d+)",
    "free_on_start": r"Free memory on device \S* ?\(([\d.]+)/",
    "total_on_start": r"Free memory on device \S* ?\([\d.]+/([\d.]+) GiB\)",
    "utilization": r"desired GPU memory utilization \(([\d.]+), ([\d.]+) GiB\)",
    "env_url": r"invalid literal for int\(\) with base 10: '((?:tcp|udp)://[^']+)'",
    "host_used": r"was running was ([\d.]+ ?GB) / [\d.]+ ?GB",
    "host_total": r"was running was [\d.]+ ?GB / ([\d.]+ ?GB)",
    "head_dim": r"dispatch head_dim (\d+)",
    "weight_key": r"^KeyError: '([\w.]+)'",
    "repo": r"The repository (?:for )?(\S+?) contains custom code|Loading (\S+) requires you",
    "need_arch": r"only supported on [^()]*\((SM\s?\d+\w*)\)",
    "shapes": r"shapes cannot be multiplied \(([^)]+)\)|expanded size of the tensor \((\d+\)"
    r" must match the existing size \(\d+)\)",
}
_IN_LOG: dict[str, str] = {
    "gpu_memory_utilization": r"gpu[_-]memory[_-]utilization[=\s:]+([\d.]+)",
    "mem_fraction_static": r"mem[_-]fraction[_-]static[=\s:]+([\d.]+)",
    "configured_max_model_len": r"(?:max_model_len=|Using max model len )(\d+)",
    "tensor_parallel_size": r"(?:tensor_parallel_size|tp_size)=(\d+)",
    "cuda_graph_max_bs": r"cuda_graph_max_bs=(\d+)",
    "port": r"\bport=(\d+)",
    "weights_loaded": r"(?:weights took|Model loading took) ([\d.]+ ?Gi?B)",
    "free_before_load": r"Load weight begin\. avail mem=([\d.]+ ?GB)",
    "swap_space": r"([\d.]+ ?GiB) out of the [\d.]+ ?GiB total CPU memory is allocated for",
}
_NEAR_RE = {k: re.compile(v) for k, v in _NEAR.items()}
_IN_LOG_RE = {k: re.compile(v) for k, v in _IN_LOG.items()}


def numbers_near(text: str) -> dict[str, str]:
    """The numbers a message states, by name, as the engine wrote them."""
    out = {}
    for key, pattern in _NEAR_RE.items():
        found = pattern.search(text)
        if found:
            out[key] = next(g for g in found.groups() if g is not None)
    return out


def numbers_in_log(messages: list[str]) -> dict[str, str]:
    """Launch settings the log states anywhere; the last statement wins."""
    out: dict[str, str] = {}
    for msg in messages:
        for key, pattern in _IN_LOG_RE.items():
            found = pattern.search(msg)
            if found:
                out[key] = found.group(1)
    return out


@dataclass(frozen=True)
class Facts:
    headline: str
    numbers: dict[str, str]
    engine: Engine | None
    kind: str
    phase: str = "startup"


_FLAGS = {
    "context": ("--max-model-len", "--context-length"),
    "memory": ("--gpu-memory-utilization", "--mem-fraction-static"),
    "tp": ("--tensor-parallel-size", "--tp"),
    "no_graphs": ("--enforce-eager", "--disable-cuda-graph"),
    "batch": ("--max-num-batched-tokens", "--chunked-prefill-size"),
    "long_env": ("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
}


def flag(engine: Engine | None, what: str) -> str:
    vllm, sglang = _FLAGS[what]
    if engine is None:
        return f"{vllm} (vLLM) / {sglang} (SGLang)"
    return vllm if engine == "vllm" else sglang


def int_of(text: str) -> int:
    return int(text.replace(",", ""))


def gib_of(text: str) -> float:
    return float(text.split()[0].replace("GiB", ""))
