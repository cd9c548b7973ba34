"""Evidence a small real model can give: SmolLM2-135M on the demo question, quotes only against
references allowed.

    python -m benchmarks.evidence_small_model [--runs 20] [--out FILE]

The engine tier's vLLM CPU build (tests/engine/: built and cached on first use) serves
SmolLM2-135M-Instruct with hermes tool-call parsing in a 2,048-token context, and `sleuth
demo`'s deployment is investigated with the demo's first question, `--runs` times in each
mode through the loop API: with report_finding's evidence as quotes only (its schema without
`lines`, the grounding check refusing references), and with references to lines allowed. The
runs are paired (the same tool_choice, temperature and seed in both modes) and every figure
is read back from the transcripts: grounded findings, runs that ended `unsupported`,
malformed outputs, and the rule each refused piece of evidence failed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import write_results
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.session import start_investigation
from sleuth.cli.demo_cmd import QUESTIONS
from sleuth.config import Budget, HostConfig, Settings, ToolChoice
from sleuth.demo_deployment import build_demo
from sleuth.tools.context import build_context
from sleuth.transcripts.events import (
    ErrorEvent,
    FindingEvent,
    SessionEnded,
    ToolExecuted,
)
from sleuth.transcripts.recording import MODEL_OUTPUT
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.engine.engine_env import EngineEnv
from tests.engine.real_model import MODEL, SMALL_CONTEXT, serve

QUESTION = QUESTIONS[0]
BUDGET = Budget(max_turns=6, max_wall_s=600)
MAX_TOKENS = 256
MODES = {"quotes only": False, "references allowed": True}


@dataclass(frozen=True)
class Spec:
    tool_choice: ToolChoice
    temperature: float
    seed: int


@dataclass
class Tally:
    """One run, read back from its transcript."""

    status: str = ""
    verified: bool = False
    crash: str = ""
    tool_calls: int = 0
    reports: int = 0
    """report_finding calls, whatever became of them."""
    malformed: int = 0
    """Calls whose arguments did not validate, or were not JSON, and calls written as text."""
    malformed_reports: int = 0
    findings: int = 0
    grounded: int = 0
    by_lines: int = 0
    """Grounded findings with at least one reference to lines."""
    refusals: Counter[str] = field(default_factory=Counter)


def specs(runs: int) -> list[Spec]:
    """`required` and `auto` in turn; the first pair greedy, the rest sampled with a seed."""
    return [
        Spec("required" if i % 2 == 0 else "auto", 0.0 if i < 2 else 0.8, 100 + i // 2)
        for i in range(runs)
    ]


def run_one(spec: Spec, references: bool, url: str, root: Path, out: Path) -> Tally:
    tally = Tally()
    settings = Settings(hosts={"local": HostConfig(roots=[str(root)])}, budget=BUDGET)
    brain = OpenAIBrain(
        MODEL,
        base_url=url,
        max_tokens=MAX_TOKENS,
        temperature=spec.temperature,
        seed=spec.seed,
        tool_choice=spec.tool_choice,
    )
    ctx = build_context(settings, [])
    path: Path | None = None
    try:
        brain.probe()
        inv = start_investigation(QUESTION, brain, ctx, settings, out, references=references)
        path = inv.writer.path
        inv.run()
    except Exception as exc:  # counted, never hidden: the figure says how many
        tally.crash = f"{type(exc).__name__}: {exc}"
    finally:
        ctx.close()
    if path is not None:
        read_back(tally, path)
    return tally


def read_back(tally: Tally, path: Path) -> None:
    tally.verified = verify(path).ok
    for event in load(path).events:
        if isinstance(event, ToolExecuted):
            tally.tool_calls += 1
            report = event.tool == REPORT_FINDING
            tally.reports += report
            if event.error_kind == "invalid_input":
                tally.malformed += 1
                tally.malformed_reports += report
            if report and isinstance(event.data, dict):
                tally.refusals.update(
                    str(q.get("failure")) for q in event.data.get("quotes", []) if q.get("failure")
                )
        elif isinstance(event, ErrorEvent) and event.where == MODEL_OUTPUT:
            tally.malformed += 1
        elif isinstance(event, FindingEvent):
            tally.findings += 1
            if event.finding.grounded:
                tally.grounded += 1
                tally.by_lines += any(e.lines for e in event.finding.evidence)
        elif isinstance(event, SessionEnded):
            tally.status = event.status


def row(mode: str, tallies: list[Tally]) -> str:
    statuses = Counter(t.status or "crashed" for t in tallies)
    refusals: Counter[str] = Counter()
    for t in tallies:
        refusals.update(t.refusals)
    refused = ", ".join(f"{k} {v}" for k, v in refusals.most_common()) or "none"
    return (
        f"| {mode} | {len(tallies)} | {sum(t.grounded for t in tallies)} "
        f"| {sum(t.grounded > 0 for t in tallies)} | {statuses.get('unsupported', 0)} "
        f"| {sum(t.malformed for t in tallies)} ({sum(t.malformed_reports for t in tallies)}) "
        f"| {sum(t.reports for t in tallies)} | {sum(t.findings for t in tallies)} "
        f"| {sum(t.by_lines for t in tallies)} | {refused} "
        f"| {', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))} "
        f"| {sum(t.verified for t in tallies)} | {sum(bool(t.crash) for t in tallies)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/evidence_small_model.md")
    )
    args = parser.parse_args()
    env = EngineEnv.ensure()
    model = env.smollm2()
    rows, walls = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "deployment"
        build_demo(root)
        with serve(env, model, SMALL_CONTEXT, Path(tmp) / "vllm.log") as server:
            for mode, references in MODES.items():
                start = time.monotonic()
                out = Path(tmp) / mode.replace(" ", "-")
                with ThreadPoolExecutor(4) as pool:
                    tallies = list(
                        pool.map(
                            lambda s, r=references, o=out: run_one(s, r, server.url, root, o),
                            specs(args.runs),
                        )
                    )
                walls[mode] = time.monotonic() - start
                rows.append(row(mode, tallies))
    lines = [
        "## Evidence a small model can give (`benchmarks/evidence_small_model.py`)",
        "",
        f"`python -m benchmarks.evidence_small_model`: SmolLM2-135M-Instruct served by vLLM "
        f"0.32.0's CPU build (hermes tool calls, `--max-model-len {SMALL_CONTEXT}`, so the "
        f"compact prompt) investigates `sleuth demo`'s deployment with the demo question "
        f'"{QUESTION}", {args.runs} runs per mode through the loop API ({BUDGET.max_turns} '
        f"turns, {MAX_TOKENS} output tokens a turn at most; tool_choice `required` and `auto` "
        "in turn; the first pair greedy, the rest sampled at 0.8 with a seed; the same runs "
        "in both modes). Quotes only: report_finding's schema has no `lines` and the check "
        "refuses references; both modes show tool outputs with numbered lines. Read back "
        "from the transcripts.",
        "",
        "| mode | runs | grounded findings | runs with one | runs `unsupported` | malformed "
        "outputs (of them report_finding) | report_finding calls | findings kept | grounded "
        "by lines | refused evidence, by rule | statuses | transcripts verified | crashes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|",
        *rows,
        "",
        "Wall time: "
        + ", ".join(f"{mode} {wall:.0f} s" for mode, wall in walls.items())
        + f" (4 runs at a time; server ready in {server.startup_s:.0f} s).",
    ]
    write_results(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
