"""Architecture: a checkpoint's layers, experts, hidden size and parameter count."""

from __future__ import annotations

from sleuth.agent.playbook.checkpoints import no_checkpoint, summaries, unread
from sleuth.agent.playbook.plan import Family, Plan, Question, Report, Result, summary_text
from sleuth.tools.checkpoints.models import CheckpointSummary

SHOWN = ("architectures", "num_hidden_layers", "hidden_size", "num_experts", "num_experts_per_tok")
"""The config facts a summary names, in this order."""


def plan_arch(q: Question) -> Plan:
    found = yield from summaries(q)
    if not found:
        return no_checkpoint(q)
    reports = [_arch_report(s) for s in found]
    yield reports
    return summary_text(reports)


def _arch_report(s: Result) -> Report:
    summary = s.model(CheckpointSummary)
    if summary is None:
        return unread(s)
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
