"""The `--json` outputs as a contract: one pydantic model per command, a JSON Schema from each.

    schema("verify")                 # the JSON Schema `sleuth schema verify` prints

Every output carries `schema_version` (bumped on a breaking change) and the path of the
transcript it wrote or read (`sleuth diagnose`, which writes none, the log it read).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sleuth.agent.replay.compare import ReplayResult
from sleuth.tools.bench.ab_run import ABResult
from sleuth.tools.bench.compare import CompareReport
from sleuth.tools.bench.goodput import GoodputSearch
from sleuth.tools.bench.models import BenchRun
from sleuth.tools.serving.diagnose import Diagnosis
from sleuth.tools.serving.preflight import PreflightReport
from sleuth.transcripts.events import Finding, SessionStatus, Totals
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.seal import Signing
from sleuth.transcripts.verify import OUTPUT_SCHEMA_VERSION, VerifyReport


class AskOutput(BaseModel):
    """`sleuth ask --json` (and `sleuth resume --json`): how the investigation ended."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    status: SessionStatus
    brain: str = Field(description="anthropic, openai or playbook.")
    answer: str = Field(description="The brain's closing text, or why the run stopped.")
    supported_by_evidence: bool = Field(
        description="Whether a grounded finding backs the answer; false means status "
        "`unsupported` (or a budget or refusal ended the run) and the answer is the model's "
        "text alone."
    )
    findings: list[Finding]
    totals: Totals
    cost_tracked: bool = Field(description="False when the model has no known price.")
    transcript: str = Field(description="The transcript this run wrote.")
    signing: Signing = Field(
        description="Who signed the transcript (key and principals), or that it is not "
        "signed and why."
    )


class ToolOutput(ToolResult):
    """`sleuth tool NAME --json`: the ToolResult a model would get, and where it was recorded."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str = Field(description="The transcript recording this call.")


class ReplayOutput(ReplayResult):
    """`sleuth replay --json`: the replay's result; `ok` false on divergence or drift."""

    schema_version: int = OUTPUT_SCHEMA_VERSION


class BenchOutput(BenchRun):
    """`sleuth bench --json`: the run's report and the files it left beside its records."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str = Field(description="The transcript recording the run_benchmark call.")
    csv: str = Field(description="One row per phase.")
    html: str = Field(description="The self-contained report: tables, plots, timeline.")
    plot: str | None = Field(None, description="The PNG of a sweep, when matplotlib drew one.")
    plots: list[str] = Field(default_factory=list, description="Every PNG drawn for the run.")
    exported: list[str] = Field(
        default_factory=list, description="The aiperf or inference-perf files (--export)."
    )


class BenchABOutput(ABResult):
    """`sleuth bench ab --json`: both sides, every run, and the verdict per metric."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str = Field(description="The transcript recording the ab_benchmark call.")
    plots: list[str] = Field(default_factory=list, description="The intervals and CDF PNGs.")


class BenchGoodputOutput(GoodputSearch):
    """`sleuth bench --find-max-rate --json`: the highest rate meeting the SLOs, and probes."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    transcript: str = Field(description="The transcript recording the goodput_search call.")
    plot: str | None = Field(None, description="Goodput and share against the rate.")


class PreflightOutput(ToolOutput):
    """`sleuth preflight --json`: the preflight call's ToolResult, and where it was recorded."""

    data: PreflightReport | None = Field(
        None, description="Every check of the launch, and whether one blocks it (null on error)."
    )


class DiagnoseOutput(BaseModel):
    """`sleuth diagnose --json`: why the server failed to start, read from its log."""

    schema_version: int = OUTPUT_SCHEMA_VERSION
    source: str = Field(description="The log file read, or - for standard input.")
    diagnosis: Diagnosis


OUTPUTS: dict[str, type[BaseModel]] = {
    "ask": AskOutput,
    "tool": ToolOutput,
    "verify": VerifyReport,
    "replay": ReplayOutput,
    "bench": BenchOutput,
    "bench-compare": CompareReport,
    "bench-ab": BenchABOutput,
    "bench-goodput": BenchGoodputOutput,
    "preflight": PreflightOutput,
    "diagnose": DiagnoseOutput,
}
"""Command name -> the model of its `--json` output."""


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of command `name`'s `--json` output; KeyError names the known ones."""
    if name not in OUTPUTS:
        raise KeyError(f"no JSON output named {name!r}; known: {', '.join(sorted(OUTPUTS))}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **OUTPUTS[name].model_json_schema(mode="serialization"),
    }
