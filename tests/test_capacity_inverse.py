"""The inverse questions and the after-launch check, on real sparse checkpoints.

find=min_gpus and find=max_context answer from the same accounting as a plain plan, so each
answer is checked against plain plans at and around it; check_launch sets an engine's KV
line beside the plan of the same launch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.agent.playbook.capacity import capacity_input
from sleuth.agent.playbook.plan import Question
from sleuth.agent.playbook.registry import route
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.capacity.launch_check import check_launch, launch_input, parse_kv_line
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    fx.shaped_checkpoint(root / "Llama-3-70B", fx.LLAMA3_70B, fx.llama3_70b_tensors())
    return root


def sandbox(root: Path) -> SandboxedHost:
    return SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())


def plan(root: Path, **args: Any) -> dict[str, Any]:
    ctx = ToolContext(hosts={"local": sandbox(root)})
    result = execute(ctx, "capacity_plan", {"model_dir": str(root / "Llama-3-70B"), **args})
    assert result.ok, result.error
    data: dict[str, Any] = result.data
    data["_output"] = result.output
    return data


def test_fewest_gpus_is_the_cheapest_tp_and_replica_count(root: Path) -> None:
    asked = {"engine": "vllm", "gpus": "H100", "context_length": 8192}
    data = plan(root, find="min_gpus", concurrency=64, **asked)
    answer = data["inverse"]
    assert answer["gpus"] == answer["tp"] * answer["replicas"] == data["gpu_count"]
    assert data["tp"] == answer["tp"] and data["dp"] == answer["replicas"]
    for cand in answer["candidates"]:
        alone = plan(root, tp=cand["tp"], **{**asked, "gpus": f"{cand['tp']}xH100"})
        per = alone["engine_account"]["max_concurrency"]
        assert cand["concurrency_per_replica"] == round(per, 2)
        assert cand["replicas"] == -(-64 // int(per))
        assert cand["gpus"] >= answer["gpus"]
    assert "answer (smallest number of NVIDIA H100 80GB HBM3" in data["_output"]


def test_longest_context_is_the_last_length_that_holds_the_requests(root: Path) -> None:
    # 4 x H100 at tp 4: Llama-3-70B's 8,192-token maximum is far beyond what 200 requests
    # can each have, so the answer is the pool's limit, not the model's.
    args = {"engine": "vllm", "gpus": "4xH100", "tp": 4}
    data = plan(root, find="max_context", concurrency=200, **args)
    length = data["inverse"]["context"]
    assert 0 < length < 8192
    at = plan(root, context_length=length, **args)["engine_account"]["max_concurrency"]
    past = plan(root, context_length=length + 1, **args)["engine_account"]["max_concurrency"]
    assert at >= 200 > past


def test_inverse_questions_route_to_capacity_with_their_numbers() -> None:
    q = Question(
        "What is the smallest number of H100 GPUs for 64 concurrent requests at 32k "
        "context with vllm?",
        {"local": ["/work"]},
    )
    assert route(q) == "capacity"
    assert capacity_input(q, "/m") == {
        "host": "local",
        "model_dir": "/m",
        "gpus": "H100",
        "context_length": 32768,
        "engine": "vllm",
        "concurrency": 64,
        "find": "min_gpus",
    }
    q = Question("Longest context for 32 concurrent requests on 8xH200 with tp 8?", {})
    assert route(q) == "capacity"
    found = capacity_input(q, "/m")
    assert found["find"] == "max_context" and found["concurrency"] == 32


def test_engine_kv_lines_parse_to_tokens_and_concurrency() -> None:
    assert parse_kv_line("INFO [kv_cache_utils.py:1319] GPU KV cache size: 476,016 tokens") == (
        476016,
        None,
    )
    assert parse_kv_line(
        "CPU KV cache size: 1,315,860 tokens, Maximum concurrency for 4,096 tokens per "
        "request: 321.25x"
    ) == (1315860, 321.25)
    assert parse_kv_line("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB") == (
        367404,
        None,
    )
    assert parse_kv_line("Loading weights took 0.02 seconds") is None


def test_a_launch_sets_the_engines_line_beside_its_prediction(root: Path) -> None:
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "M",
            "--tensor-parallel-size", "8", "--max-model-len=4096", "--enforce-eager"]  # fmt: skip
    args = launch_input("vllm", str(root / "Llama-3-70B"), argv, {})
    assert (args.tp, args.context_length, args.enforce_eager) == (8, 4096, True)
    predicted = plan(root, engine="vllm", gpus="8xH100", tp=8, context_length=4096,
                     enforce_eager=True)["engine_account"]["kv_tokens"]  # fmt: skip
    assert predicted > 0
    # A GPU launch is planned on the host's own GPUs; this host has none, so no check.
    line = f"GPU KV cache size: {predicted:,} tokens"
    gpu = check_launch(sandbox(root), "vllm", str(root / "Llama-3-70B"), argv, {}, line)
    assert gpu is None
    cpu = check_launch(
        sandbox(root),
        "vllm",
        str(root / "Llama-3-70B"),
        argv,
        {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "CPU KV cache size: 12,345 tokens",
    )
    assert cpu is not None and cpu.reported_tokens == 12345
    assert cpu.predicted_tokens > 0 and cpu.error == (cpu.predicted_tokens - 12345) / 12345
    assert "the engine reports 12,345 tokens; Sleuth predicted" in cpu.text()
