"""The quantisation floor: the compute capability each engine needs per quantisation method.

Each method's `get_min_capability` line, as cited; below `native_capability` the engine
loads through a slower weight-only fallback. Where a release changed the rule, the
earlier rule is kept beside it, chosen by the installed version.
"""

from __future__ import annotations

from pydantic import BaseModel

from sleuth.tools.capacity.rules import Engine, Rule, sglang_rule, vllm_rule


class QuantRule(BaseModel):
    method: str
    """The engine's name for the method (modelopt_fp4, fp8, ...)."""
    min_capability: int
    """The engine refuses to load below this (SM version × 10)."""
    native_capability: int
    """Below this the engine loads through a slower fallback (weight-only Marlin)."""
    file: str
    """The method's file in the engine's package, under QUANT_DIRS: where `rule` is."""
    rule: Rule
    earlier: EarlierRule | None = None
    """The rule as releases before `earlier.since` had it, when it changed."""

    def for_version(self, version: str | None) -> tuple[int, Rule]:
        """The minimum capability (and its line) of an installed release, by its version."""
        if self.earlier and version and _version(version) < _version(self.earlier.since):
            return self.earlier.min_capability, self.earlier.rule
        return self.min_capability, self.rule


class EarlierRule(BaseModel):
    since: str
    """The first release with the current rule."""
    min_capability: int
    rule: Rule


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


QUANT_DIRS = {"sglang": "srt/layers/quantization", "vllm": "model_executor/layers/quantization"}
"""Where each engine keeps its quantisation methods, under its installed package."""


def _sglang(
    method: str,
    floor: int,
    native: int,
    file: str,
    line: int,
    quote: str,
    earlier: EarlierRule | None = None,
) -> QuantRule:
    rule = sglang_rule(f"layers/quantization/{file}", line, quote)
    return QuantRule(
        method=method,
        min_capability=floor,
        native_capability=native,
        file=file,
        rule=rule,
        earlier=earlier,
    )


def _vllm(
    method: str, floor: int, native: int, file: str, quote: str, where: str = "get_min_capability"
) -> QuantRule:
    rule = vllm_rule(f"vllm/model_executor/layers/quantization/{file}", where, quote)
    return QuantRule(
        method=method, min_capability=floor, native_capability=native, file=file, rule=rule
    )


# Releases up to 0.5.12 refused NVFP4 below Blackwell; 0.5.13 added the fallback.
_SGLANG_FP4_BEFORE = EarlierRule(
    since="0.5.13",
    min_capability=100,
    rule=Rule(
        source="sglang 0.5.12 python/sglang/srt/layers/quantization/modelopt_quant.py:1135",
        quote="return 100  (ModelOptFp4Config; sglang <= 0.5.12)",
    ),
)
_VLLM_FP8 = (
    "return 75  (below SM89: 'GPU does not have native support for FP8 computation but FP8 "
    "quantization is being used. Weight-only FP8 compression will be used leveraging the "
    "Marlin kernel.')"
)

# fmt: off
SGLANG_QUANT = {rule.method: rule for rule in (
    _sglang("modelopt_fp4", 80, 100, "modelopt_quant.py", 1550, "return 80  (ModelOptFp4Config)",
            _SGLANG_FP4_BEFORE),
    _sglang("modelopt_fp8", 89, 89, "modelopt_quant.py", 463, "return 89  (ModelOptFp8Config)"),
    _sglang("fp8", 80, 89, "fp8.py", 339, "return 100 if self.use_mxfp8 else 80"),
    _sglang("w8a8_fp8", 89, 89, "w8a8_fp8.py", 67, "return 89"),
    _sglang("awq", 80, 80, "awq/awq.py", 308, "return 80"),
    _sglang("gptq", 60, 80, "gptq/gptq.py", 140, "return 60"),
    _sglang("mxfp4", 80, 100, "mxfp4.py", 339, "return 80"),
    _sglang("compressed-tensors", 70, 89, "compressed_tensors/compressed_tensors.py", 161,
            "return 70"),
)}
VLLM_QUANT = {rule.method: rule for rule in (
    _vllm("modelopt_fp4", 75, 100, "modelopt.py",
          "return 75  (below SM100 the MarlinNvFp4LinearKernel weight-only path)",
          "ModelOptNvFp4Config.get_min_capability @00155cd"),
    _vllm("modelopt", 89, 89, "modelopt.py", "return 89",
          "ModelOptFp8Config.get_min_capability @00155cd"),
    _vllm("fp8", 75, 89, "fp8.py", _VLLM_FP8, "Fp8Config.get_min_capability"),
    _vllm("awq", 75, 80, "awq.py", "return 75"),
    _vllm("gptq", 60, 80, "gptq.py", "return 60"),
    _vllm("mxfp4", 80, 100, "mxfp4.py", "return 80"),
    _vllm("compressed-tensors", 70, 89, "compressed_tensors/compressed_tensors.py", "return 70"),
)}
# fmt: on


def quant_rules(engine: str) -> dict[str, QuantRule]:
    return SGLANG_QUANT if engine == "sglang" else VLLM_QUANT


MODELOPT = ("modelopt", "nvidia-modelopt", "unknown")
"""Methods whose algorithm names the engine's method: ModelOpt's producer names, and the
probe's "unknown" for a quantization_config with ModelOpt's `quant_algo` but no method."""
ALIASES = {"awq_marlin": "awq", "gptq_marlin": "gptq"}
"""Kernel variants the engines pick for a checkpoint of the method their rules are keyed by."""


def engine_method(method: str | None, algorithm: str | None, engine: Engine) -> str | None:
    """The engine's name for a checkpoint's declared quantisation, as vLLM's
    QUANTIZATION_METHODS and SGLang's name it (bitsandbytes, compressed-tensors, fp8, ...);
    None if unquantised. Only a ModelOpt checkpoint's algorithm picks the name (ModelOpt FP8
    is vLLM's `modelopt`, SGLang's `modelopt_fp8`): a bitsandbytes fp4 or a
    compressed-tensors NVFP4 checkpoint keeps its own method."""
    m, a = (method or "").lower(), (algorithm or "").upper()
    if not m and not a:
        return None
    if m in MODELOPT or not m:
        if "FP4" in a and "MX" not in a:
            return "modelopt_fp4"
        if "FP8" in a:
            return "modelopt" if engine == "vllm" else "modelopt_fp8"
    return ALIASES.get(m, m) or None
