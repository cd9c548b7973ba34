"""Replay speed: a 200-event transcript replayed offline through the real loop.

    python benchmarks/replay.py [--out benchmarks/results/replay.md]

The transcript is recorded by the loop itself (a scripted brain, 65 turns of two calls each,
tool outputs of about 2 KB, then a finding), so its events are what a real session writes.
The target (issue 5) is under 0.5 s for load + replay + findings check.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sleuth.agent.calls import Call
from sleuth.agent.history import opening_message
from sleuth.agent.loop import Investigation
from sleuth.agent.protocols import BrainReply, Request
from sleuth.agent.replay.run import replay
from sleuth.agent.session import tool_specs
from sleuth.config import Budget
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import Tool, ToolInput
from sleuth.transcripts.events import ContentBlock, ModelResponse, SessionStarted, Usage
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter, load

TOOL_TURNS = 65
OUTPUT = "\n".join(f"model.layers.{i}.mlp.gate_proj.weight BF16 [7168, 18432]" for i in range(40))
BUDGET = Budget(max_turns=100, max_tool_calls=500)


class Scripted:
    name, model = "anthropic", "claude-sonnet-4-5"

    def complete(self, request: Request) -> BrainReply:
        turn = len(request.messages) // 2 + 1
        if turn <= TOOL_TURNS:
            blocks = [
                ContentBlock(
                    type="tool_use",
                    id=f"c{turn}_{j}",
                    name="read_lines",
                    input={"host": "local", "path": f"shard{turn}_{j}.txt"},
                )
                for j in (1, 2)
            ]
        elif turn == TOOL_TURNS + 1:
            evidence = [{"call_id": "c7_1", "quote": "model.layers.3.mlp.gate_proj.weight BF16"}]
            blocks = [
                ContentBlock(
                    type="tool_use",
                    id="f1",
                    name="report_finding",
                    input={
                        "claim": "Layer 3 is BF16.",
                        "verdict": "yes",
                        "confidence": 0.9,
                        "evidence": evidence,
                    },
                )
            ]
        else:
            blocks = [ContentBlock(type="text", text="Done.")]
        usage = Usage(input_tokens=1000, output_tokens=50)
        return BrainReply(response=ModelResponse(content=blocks), usage=usage)


def canned(ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult:
    """The executor: every call answered with the same output, nothing run."""
    return ToolResult(
        ok=True,
        output=OUTPUT,
        argv=[["sed", "-n", "1,40p", "--", call.input["path"]]],
        exit_code=0,
        duration_s=0.01,
    )


def record(folder: Path) -> Path:
    writer = TranscriptWriter.create(folder, "bench")
    tools = tool_specs()
    writer.append(
        SessionStarted(
            session_id="bench",
            question="q",
            hosts=[],
            brain="anthropic",
            model=Scripted.model,
            budget=BUDGET.model_dump(),
            tools=tools,
        )
    )
    inv = Investigation(
        brain=Scripted(),
        ctx=ToolContext(hosts={}),
        writer=writer,
        system="",
        tools=tools,
        messages=[opening_message("q", [])],
        budget=BUDGET,
        executor=canned,
    )
    result = inv.run()
    assert result.status == "answered" and result.findings[0].grounded
    return writer.path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = record(Path(tmp))
        events, size = len(load(path).events), path.stat().st_size
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = replay(path)
            times.append(time.perf_counter() - start)
            assert result.ok and result.findings == result.recorded_findings
    median, best = statistics.median(times) * 1000, min(times) * 1000
    table = (
        "## Replay\n\n"
        f"`python benchmarks/replay.py`: a {events}-event transcript ({size // 1024} KiB; "
        f"{TOOL_TURNS} turns of two ~2 KB tool results, then a finding), recorded by the loop, "
        f"replayed offline through the loop (load, recorded turns and results, grounding, "
        f"findings compared). {args.repeats} repeats.\n\n"
        "| operation | median | min | target |\n|---|---|---|---|\n"
        f"| replay {events} events offline | {median:.1f} ms | {best:.1f} ms | < 500 ms |\n"
    )
    print(table)
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()
