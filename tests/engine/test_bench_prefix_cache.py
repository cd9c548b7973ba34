"""Trace replay on a real vLLM (CPU build): shared hash ids become shared prompt prefixes
that vLLM's prefix cache hits, and a trace with nothing shared hits nothing.

Both traces are made here in Mooncake's format (4 system prompts of two 512-token blocks x
3 questions of 64 tokens, and the same load with 12 system prompts of one question each),
replayed through run_benchmark over SSH with the model's own tokenizer ('auto'), and judged
by vLLM's own counters, vllm:prefix_cache_queries and vllm:prefix_cache_hits, read from
/metrics before and after each replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.tools.bench.traces import shared_prefix_trace, to_mooncake
from sleuth.tools.context import ToolContext
from tests.engine.conftest import RemoteFactory, free_port
from tests.engine.engine_env import EngineEnv

SYSTEMS, QUESTIONS, SYSTEM_LEN, QUESTION_LEN = 4, 3, 1024, 64


@pytest.fixture(scope="module")
def vllm(
    engine_env: EngineEnv, remote_context: RemoteFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ToolContext, int, Path]]:
    traces = tmp_path_factory.mktemp("traces")
    ctx = remote_context([str(engine_env.root), str(traces)])
    port = free_port()
    launch = execute(
        ctx,
        "launch_server",
        {
            "host": "gpu",
            "engine": "vllm",
            "model_path": str(engine_env.model),
            "port": port,
            "python": str(engine_env.python),
            "extra_args": ["--enable-prefix-caching"],
            "env": engine_env.server_env(),
            "timeout_s": 900,
            "poll_s": 1.0,
        },
    )
    assert launch.ok, launch.output
    try:
        yield ctx, port, traces
    finally:
        execute(ctx, "stop_server", {"host": "gpu", "server_id": launch.data["server_id"]})


def replay(ctx: ToolContext, port: int, env: EngineEnv, trace: Path, seed: int) -> dict[str, Any]:
    result = execute(
        ctx,
        "run_benchmark",
        {
            "host": "gpu",
            "endpoint": f"http://127.0.0.1:{port}",
            "model": str(env.model),
            "api": "completions",
            "dataset": "trace",
            "dataset_path": str(trace),
            "output_len": 4,
            "tokenizer": "auto",
            "warmup": 0,
            "seed": seed,  # block texts differ between the two replays: no carry-over
            "python": str(env.python),
            "timeout_s": 600,
        },
    )
    assert result.ok, result.output
    data: dict[str, Any] = result.data
    return data


def write(folder: Path, name: str, systems: int, questions: int) -> Path:
    requests = shared_prefix_trace(
        systems=systems,
        questions=questions,
        system_len=SYSTEM_LEN,
        question_len=QUESTION_LEN,
        output_len=4,
        interval_ms=400,  # each prefill done before the next request arrives
    )
    path = folder / name
    path.write_text(to_mooncake(requests))
    return path


def counters(data: dict[str, Any]) -> tuple[float, float]:
    """vLLM's own prefix-cache counters over the replay: (queries, hits), in tokens."""
    lines = [json.loads(x) for x in Path(data["jsonl"]).read_text().splitlines()]
    phase = next(x for x in lines if x["type"] == "phase")
    before, after = phase["counters_before"]["/metrics"], phase["counters_after"]["/metrics"]
    keys = [k for k in after if k.startswith("vllm:prefix_cache_")]
    assert {"vllm:prefix_cache_queries", "vllm:prefix_cache_hits"} <= {
        k.removesuffix("_total") for k in keys
    }, keys

    def delta(name: str) -> float:
        key = next(k for k in keys if k.removesuffix("_total") == name)
        return float(after[key]) - float(before[key])

    return delta("vllm:prefix_cache_queries"), delta("vllm:prefix_cache_hits")


def test_shared_hash_ids_hit_vllms_prefix_cache_and_unshared_ones_do_not(
    vllm: tuple[ToolContext, int, Path], engine_env: EngineEnv
) -> None:
    ctx, port, folder = vllm
    unshared = write(folder, "unshared.jsonl", SYSTEMS * QUESTIONS, 1)
    shared = write(folder, "shared.jsonl", SYSTEMS, QUESTIONS)
    cold = replay(ctx, port, engine_env, unshared, seed=1)
    warm = replay(ctx, port, engine_env, shared, seed=2)
    for data in (cold, warm):
        phase = data["report"]["phases"][0]
        assert phase["completed"] == SYSTEMS * QUESTIONS and phase["failed"] == 0
        assert phase["request_rate"] is None  # replayed at the trace's own times
        # The model's tokenizer cut each block to 512 tokens: the server counts what we sent.
        assert phase["prompt_tokens"]["mean"] == pytest.approx(SYSTEM_LEN + QUESTION_LEN, abs=8)
    cold_queries, cold_hits = counters(cold)
    warm_queries, warm_hits = counters(warm)
    print(  # the figures for the record (pytest -s shows them)
        f"vLLM prefix cache, tokens: unshared trace {cold_hits:.0f} hits of {cold_queries:.0f} "
        f"queries; shared trace {warm_hits:.0f} hits of {warm_queries:.0f} queries"
    )
    assert cold_queries >= SYSTEMS * QUESTIONS * SYSTEM_LEN
    assert cold_hits <= 0.01 * cold_queries, (cold_queries, cold_hits)
    # Every question after the first of its system prompt reuses that prompt's two blocks.
    reusable = SYSTEMS * (QUESTIONS - 1) * SYSTEM_LEN
    assert warm_hits >= 0.9 * reusable, (warm_queries, warm_hits)
    server = warm["report"]["phases"][0]["server"]
    assert server["prefix_cache_hits"] == warm_hits and server["prefix_cache_hit_rate"] > 0.5
