"""Quantisation: a checkpoint's method, algorithm, excluded modules and tensor dtypes."""

from __future__ import annotations

from sleuth.agent.playbook.checkpoints import checkpoint_plan
from sleuth.agent.playbook.plan import Family, Report, Result
from sleuth.tools.checkpoints.models import CheckpointSummary


@checkpoint_plan
def plan_quant(s: Result, summary: CheckpointSummary) -> Report:
    """The finding on one checkpoint: its quantisation method, group size, excluded modules
    and tensor dtypes."""
    quant, name = summary.quantization, summary.model_dir
    method = (quant.algorithm or quant.method) if quant else None
    evidence = [(s, s.line("quantization:")), (s, s.line("tensors:", "dtypes"))]
    if quant is None or not method:
        return Report(f"{name} declares no quantisation.", "no", 0.7, evidence)
    dtypes = ", ".join(f"{k}×{v}" for k, v in summary.dtypes.items())
    excluded = [str(i["pattern"]) for i in quant.ignore]
    return Report(
        f"{name} is quantised with {method}"
        + (f", group size {quant.group_size}" if quant.group_size else "")
        + (f"; excluded: {', '.join(excluded[:8])}" if excluded else "")
        + (f"; tensors by dtype: {dtypes}" if dtypes else ""),
        "yes",
        0.85,
        evidence,
    )


FAMILY = Family(
    name="quant",
    help="quantisation: method, algorithm, excluded modules and dtypes of a checkpoint",
    plan=plan_quant,
    words=(
        "quantis",
        "quantiz",
        "nvfp4",
        "fp8",
        "fp4",
        "awq",
        "gptq",
        "int4",
        "precision",
        "dtype",
    ),
    rank=50,
)
