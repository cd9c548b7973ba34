"""The checkpoints a question is about (named in it, else found under the host's roots), and the
plan of a family that answers from each one's checkpoint_summary."""

from __future__ import annotations

from collections.abc import Callable, Generator

from sleuth.agent.playbook.plan import Call, Plan, Question, Report, Result, Step, summary_text
from sleuth.agent.playbook.sources import is_engine_path
from sleuth.tools.checkpoints.models import CheckpointSummary

SummaryReport = Callable[[Result, CheckpointSummary], Report]
"""A family's finding on one checkpoint, from its checkpoint_summary's result and model."""


def model_dirs(q: Question) -> Generator[Step, list[Result], list[str]]:
    """Checkpoint folders: named in the question, else found under the host's roots."""
    dirs = [
        p
        for p in q.paths
        if not p.endswith((".json", ".safetensors", ".py")) and not is_engine_path(p)
    ]
    if dirs:
        return dirs
    roots = q.hosts.get(q.host, ["."])
    (found,) = yield [
        Call("list_dir", {"host": q.host, "path": roots[0], "depth": 4, "max_entries": 5000})
    ]
    # list_dir has no model of its own: its data is {"path", "entries": [{"name", ...}]}.
    listing = (found.data or {}) if not found.is_error else {}
    base = listing.get("path", roots[0])
    dirs = sorted(
        f"{base}/{e['name'][: -len('/config.json')]}"
        for e in listing.get("entries", [])
        if e["name"].endswith("/config.json")
    )
    named = [d for d in dirs if d.rsplit("/", 1)[-1].lower() in q.text.lower()]
    return (named or dirs)[:4]


def summary_reports(
    q: Question, report: SummaryReport
) -> Generator[Step, list[Result], list[Report]]:
    """`report` on each checkpoint the question is about, from its checkpoint_summary (one that
    failed: `_unread`); none found: none."""
    dirs = yield from model_dirs(q)
    if not dirs:
        return []
    found = yield [Call("checkpoint_summary", {"host": q.host, "model_dir": d}) for d in dirs]
    return [_report_on(s, report) for s in found]


def checkpoint_plan(report: SummaryReport) -> Callable[[Question], Plan]:
    """The plan of a family that answers from each checkpoint's summary alone: `report` on
    each one. A decorator: `@checkpoint_plan def plan_x(s, summary) -> Report`."""

    def plan(q: Question) -> Plan:
        reports = yield from summary_reports(q, report)
        if not reports:
            return no_checkpoint(q)
        yield reports
        return summary_text(reports)

    return plan


def _report_on(s: Result, report: SummaryReport) -> Report:
    summary = s.model(CheckpointSummary)
    return _unread(s) if summary is None else report(s, summary)


def no_checkpoint(q: Question) -> str:
    return (
        f"No checkpoint (a folder with config.json) was found under the roots of host "
        f"{q.host!r}. Name the model folder in the question, e.g. /models/MyModel."
    )


def _unread(s: Result) -> Report:
    """The finding for a checkpoint_summary that failed: it could not be read, as the call
    said; nothing is claimed of what the checkpoint holds."""
    return Report(
        f"The checkpoint could not be read (checkpoint_summary failed): {s.output.strip()[:200]}",
        "unknown",
        0.3,
        [(s, s.line("error") or s.line())],
    )
