"""compare_benchmarks: is run B different from run A, beyond the machine's noise?"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from sleuth.tools.bench.compare import CompareError, compare
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError
from sleuth.transcripts.results import ToolResult


class CompareBenchmarksInput(ToolInput):
    baseline: str = Field(description="Records of run A: the `jsonl` path run_benchmark returned.")
    candidate: str = Field(description="Records of run B, to judge against A.")
    factor: list[str] = Field(
        default_factory=list,
        description="Settings expected to differ between the runs (e.g. label, model).",
    )


@tool()
def compare_benchmarks(ctx: ToolContext, args: CompareBenchmarksInput) -> ToolResult:
    """Is run B different from run A? Compares two run_benchmark records per phase and metric
    (TTFT, TPOT, ITL, E2E at p50 and p90): B's change with a 95% bootstrap interval over the
    requests, called significant only when the interval excludes zero and the change is at
    least 3%. Warns when the runs' settings differ in more than `factor` or a run was
    client-limited. Reads only records that run_benchmark saved in this run's results folder.
    """
    paths = [_record(ctx, args.baseline), _record(ctx, args.candidate)]
    try:
        report = compare(paths[0], paths[1], factor=args.factor)
    except CompareError as exc:
        raise ToolError(str(exc)) from exc
    lines = [f"B {paths[1].name} against A {paths[0].name}"]
    for phase in report.phases:
        lines += [f"phase {phase.phase} ({phase.load_a}): {m.sentence}" for m in phase.metrics]
    lines += [f"warning: {w}" for w in report.warnings]
    lines.append(f"summary: {report.summary}")
    return ToolResult(ok=True, output="\n".join(lines), data=report.model_dump(mode="json"))


def _record(ctx: ToolContext, given: str) -> Path:
    folder = ctx.results_dir.resolve()
    try:
        path = (folder / given).resolve()  # an absolute `given` replaces the folder
        found = path.parent == folder and path.suffix == ".jsonl" and path.is_file()
    except (ValueError, OSError):  # a NUL byte, a name too long: not a record either
        found = False
    if not found:
        raise ToolError(
            f"{given!r} is not a benchmark record of this run; give the `jsonl` path that "
            f"run_benchmark returned (a .jsonl file in {folder})"
        )
    return path
