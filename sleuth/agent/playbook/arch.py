"""Architecture: a checkpoint's layers, experts, hidden size and parameter count."""

from __future__ import annotations

from sleuth.agent.playbook.checkpoints import checkpoint_plan
from sleuth.agent.playbook.plan import Family, Report, Result
from sleuth.tools.checkpoints.models import CheckpointSummary

SHOWN = ("architectures", "num_hidden_layers", "hidden_size", "num_experts", "num_experts_per_tok")
"""The config facts a summary names, in this order."""


@checkpoint_plan
def plan_arch(s: Result, summary: CheckpointSummary) -> Report:
    """The finding on one checkpoint: its layers, experts, hidden size and parameter count."""
    config, name, params = summary.config or {}, summary.model_dir, summary.params.logical
    parts = [f"{k.replace('_', ' ')} {config[k]}" for k in SHOWN if config.get(k)]
    if params:
        parts.append(f"{params:,} parameters counted from the headers")
    return Report(
        f"{name}: " + "; ".join(parts),
        "yes",
        0.85,
        [(s, s.line("config:")), (s, s.line("params:"))],
    )


FAMILY = Family(
    name="arch",
    help="architecture: layers, experts, attention types and parameter count",
    plan=plan_arch,
    words=(
        "architecture",
        "layers",
        "experts",
        "parameters",
        "params",
        "hidden size",
        "how big",
        "attention",
    ),
    rank=60,
)
