"""MTP heads: does a checkpoint declare its multi-token-prediction heads, and carry them?"""

from __future__ import annotations

from sleuth.agent.playbook.checkpoints import no_checkpoint, summary_reports
from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, Result, summary_text
from sleuth.agent.playbook.sources import engine_dir, engine_report
from sleuth.tools.checkpoints.models import CheckpointSummary


def plan_mtp(q: Question) -> Plan:
    reports = yield from summary_reports(q, _mtp_report)
    if not reports:
        return no_checkpoint(q)
    env_results = yield [Call("python_env", {"host": q.host})]
    engine = engine_dir(env_results[0], q)
    if engine:
        (grep,) = yield [
            Call(
                "grep",
                {
                    "host": q.host,
                    "path": engine,
                    "include_glob": "*.py",
                    "pattern": r"class \w*(MTP|NextN)\w*|speculative.algorithm",
                    "max_matches": 20,
                },
            )
        ]
        reports = [
            *reports,
            engine_report(grep, engine, "MTP model classes and speculative flags"),
        ]
    yield reports
    return summary_text(reports)


def _mtp_report(s: Result, summary: CheckpointSummary) -> Report:
    name = summary.model_dir
    declared, tensors = summary.mtp.declared_layers, summary.mtp.tensors
    # The checkpoint's own warning about its MTP heads, quoted as the output shows it.
    warning = next((w for w in summary.warnings if "mtp" in w.lower()), None)
    evidence = [(s, s.line("mtp:")), (s, s.line(f"WARNING: {warning}") if warning else None)]
    if declared and tensors:
        return Report(
            f"{name} declares {declared} MTP layer(s) and carries {tensors} MTP "
            "tensors: the MTP heads survived.",
            "yes",
            0.9,
            evidence,
        )
    if declared and not tensors:
        return Report(
            f"{name} declares {declared} MTP layer(s) in config.json, but its weights "
            "hold no MTP tensors: the heads were stripped, so speculative decoding "
            "with NEXTN/MTP cannot load them.",
            "no",
            0.9,
            evidence,
            ["Re-export the checkpoint keeping the MTP layers, or serve without MTP."],
        )
    if tensors:
        return Report(
            f"{name} carries {tensors} MTP tensors that config.json does not declare.",
            "partial",
            0.7,
            evidence,
        )
    return Report(f"{name} neither declares nor carries MTP heads.", "no", 0.8, evidence)


FAMILY = Family(
    name="mtp",
    help="MTP heads: does a checkpoint declare and carry its multi-token-prediction heads?",
    plan=plan_mtp,
    words=("mtp", "nextn", "multi-token", "multi token", "draft head", "mtp head"),
    rank=40,
)
