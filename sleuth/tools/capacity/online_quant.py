"""`--quantization fp8` on a checkpoint: stored as FP8 as it loads, or the checkpoint's own.

On a checkpoint that declares no quantization, both engines build every linear layer and
fused-MoE layer that gets the quant config with the online FP8 method, which quantises the
16-bit weights as they load: the decoder layers' weight matrices (attention projections,
MLP, routed and shared experts) end at 1 byte per element. Embeddings and lm_head are not
linear layers (UnquantizedEmbeddingMethod), routers are built with quant_config=None, and
norms and biases are not the method's weights: they keep the checkpoint's dtype. On a
checkpoint that declares a method, the engine compares it with the argument: an FP8 (or
ModelOpt) checkpoint keeps its own format, any other raises before loading.
"""

from __future__ import annotations

from sleuth.tools.capacity.rules import Engine, Rule, gib, sglang_rule
from sleuth.tools.capacity.weights import WeightShare

VL = "vllm 0.19.0 vllm/"
VL_LINEAR = Rule(
    source=f"{VL}model_executor/layers/quantization/fp8.py:547",
    quote="qweight, weight_scale = ops.scaled_fp8_quant(layer.weight, scale=None)  "
    "(Fp8OnlineLinearMethod: one float32 scale per tensor)",
)
VL_MOE = Rule(
    source=f"{VL}model_executor/layers/quantization/fp8.py:1024",
    quote="w13[expert, :, :], w13_scale[expert] = ops.scaled_fp8_quant(...)  "
    "(Fp8OnlineMoEMethod: each expert's fused weights, one scale each)",
)
VL_LAYERS = Rule(
    source=f"{VL}model_executor/layers/quantization/fp8.py:185",
    quote="Fp8Config.get_quant_method: LinearBase -> Fp8OnlineLinearMethod, FusedMoE -> "
    "Fp8OnlineMoEMethod (line 202) when not is_checkpoint_fp8_serialized; other layers None "
    "(vocab_parallel_embedding.py:268 quant_method = UnquantizedEmbeddingMethod(); "
    "mixtral.py:120 self.gate = ReplicatedLinear(..., quant_config=None))",
)
VL_MISMATCH = Rule(
    source=f"{VL}config/model.py:989",
    quote="raise ValueError('Quantization method specified in the model config "
    "({quant_method}) does not match the quantization method specified in the "
    "`quantization` argument ({self.quantization}).')  (ModelOpt and auto-round "
    "checkpoints override the argument first, lines 962-981)",
)
SG_LINEAR = sglang_rule(
    "layers/quantization/fp8.py",
    1160,
    "if not self.is_checkpoint_fp8_serialized: qweight, weight_scale = "
    "per_token_group_quant_fp8(layer.weight, layer.weight.shape[-1])  (one float32 scale "
    "per output row; input_to_float8, per tensor, at line 1170 without CUTLASS)",
)
SG_MOE = sglang_rule(
    "layers/quantization/fp8.py",
    2619,
    "elif not self.quant_config.is_checkpoint_fp8_serialized: ... scaled_fp8_quant("
    "layer.w13_weight.data[expert, :, :])  (Fp8MoEMethod, one scale per expert)",
)
SG_LAYERS = sglang_rule(
    "layers/quantization/fp8.py",
    407,
    "Fp8Config.get_quant_method: LinearBase -> Fp8LinearMethod, FusedMoE -> Fp8MoEMethod; "
    "embeddings UnquantizedEmbeddingMethod (vocab_parallel_embedding.py:306), routers "
    "ReplicatedLinear(..., quant_config=None) (models/mixtral.py:90)",
)
SG_MISMATCH = sglang_rule(
    "configs/model_config.py",
    2143,
    "raise ValueError('Quantization method specified in the model config ({quant_method}) "
    "does not match the quantization method specified in the `quantization` argument "
    "({self.quantization}).')  (ModelOpt checkpoints override the argument first)",
)

KEEPS_OWN = {
    "vllm": {"fp8", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "auto-round"},
    "sglang": {"fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed"},
}
"""Declared methods the engine loads as they are under `--quantization fp8`: the same
method, or a ModelOpt (vLLM also auto-round) checkpoint whose override replaces the argument."""


def online_fp8(quantization: str | None, declared: str | None) -> bool:
    """Whether the engine stores the linear weights as FP8 as they load: `--quantization
    fp8` on a checkpoint that declares no quantization of its own."""
    return quantization == "fp8" and declared is None


def judged(
    engine: Engine, declared: str | None, share: WeightShare, dtype: str
) -> tuple[bool, str, list[Rule]]:
    """What `--quantization fp8` does to this checkpoint: (accepted, detail, rules)."""
    vllm = engine == "vllm"
    if declared is None:
        scales = (
            "one per tensor" if vllm else "one per output row: 4 B ÷ the input width, 0.1 % at 4096"
        )
        detail = (
            f"--quantization fp8 on a checkpoint that declares no quantization: the engine "
            f"stores the decoder layers' {share.fp8_tensors:,} linear weight tensors as FP8 as "
            f"they load, {gib(share.fp8_bytes_before)} in {dtype} -> "
            f"{gib(share.fp8_bytes_after)} at 1 B each (whole checkpoint, before sharding); "
            f"embeddings, lm_head, norms, biases and routers stay {dtype}; the float32 scales "
            f"({scales}) are negligible and not counted"
        )
        return (
            True,
            detail,
            [VL_LINEAR, VL_MOE, VL_LAYERS] if vllm else [SG_LINEAR, SG_MOE, SG_LAYERS],
        )
    mismatch = VL_MISMATCH if vllm else SG_MISMATCH
    if declared in KEEPS_OWN[engine]:
        detail = (
            f"--quantization fp8 on a checkpoint that declares {declared}: nothing is "
            "re-quantised; the checkpoint's own method governs its weights (sized as stored)"
        )
        return True, detail, [mismatch]
    detail = (
        f"--quantization fp8 on a checkpoint that declares {declared}: {engine} refuses the "
        "mismatch before loading; drop --quantization (the engine reads the checkpoint's own)"
    )
    return False, detail, [mismatch]


def weights_how(engine: str) -> tuple[str, str]:
    """The weights term's arithmetic and rule when the engine quantises as it loads."""
    how = (
        "the checkpoint's tensor bytes on this GPU, sharded as the engine shards them, with "
        "the decoder layers' linear weights at 1 B each (--quantization fp8: stored as FP8 as "
        "they load; their float32 scales, negligible, not counted); embeddings, lm_head, "
        "norms, biases and routers in the checkpoint's dtype"
    )
    rule = VL_LINEAR if engine == "vllm" else SG_LINEAR
    return how, f"{rule.source} ({rule.quote.split('  (')[0]})"
