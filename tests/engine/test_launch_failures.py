"""Real launch failures of the CPU engine, each diagnosed by Sleuth within one poll.

A too-long --max-model-len, a KV cache too small for the model's length, a folder that is
not a model, a port already taken, and an interpreter without vLLM: each comes back with
`data.diagnosis` holding the right kind, the cause line as headline (never "Traceback ..."),
that line quoted as evidence from the real log, and a fix with the log's numbers.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.tools.context import ToolContext
from sleuth.transcripts.results import ToolResult
from tests.engine.conftest import RemoteFactory, free_port
from tests.engine.engine_env import EngineEnv, SourceEnv

POLL_S = 1.0


@pytest.fixture(scope="module")
def ctx(engine_env: EngineEnv, remote_context: RemoteFactory, tmp_path_factory: Any) -> ToolContext:
    scratch = tmp_path_factory.mktemp("not-a-model")
    (scratch / "README.md").write_text("notes, not a model\n")
    return remote_context([str(engine_env.root), str(scratch)])


def launch(ctx: ToolContext, engine: EngineEnv, **fields: Any) -> ToolResult:
    # --enforce-eager: no torch.compile warm-up (a minute on 2 cores) before the failures.
    fields["extra_args"] = [*fields.get("extra_args", []), "--enforce-eager"]
    raw = {
        "host": "gpu",
        "engine": "vllm",
        "model_path": str(engine.model),
        "port": free_port(),
        "python": str(engine.python),
        "env": engine.server_env(),
        "timeout_s": 600,
        "poll_s": POLL_S,
        # The engine's own failures are under test here; preflight would refuse some first.
        "preflight": False,
        **fields,
    }
    return execute(ctx, "launch_server", raw)


def check_diagnosis(result: ToolResult, kind: str) -> dict[str, Any]:
    assert not result.ok, result.output
    diagnosis: dict[str, Any] = result.data["diagnosis"]
    assert diagnosis["kind"] == kind, diagnosis
    assert not diagnosis["headline"].startswith("Traceback")
    assert any(diagnosis["headline"] in line for line in diagnosis["evidence"]), diagnosis
    assert f"diagnosis: {kind}: " in result.output
    return diagnosis


def within_one_poll(ctx: ToolContext, result: ToolResult) -> None:
    """The launch answered within one poll (plus the settle for the error's last lines) of
    the moment the engine's process ended."""
    status = execute(ctx, "server_status", {"host": "gpu", "server_id": result.data["server_id"]})
    assert not status.data["alive"]
    ran_for = status.data["uptime_s"]  # until its exit, per the exit-status file
    assert result.data["elapsed_s"] - ran_for <= POLL_S + 2.0, (result.data, status.data)


def test_too_long_max_model_len(ctx: ToolContext, engine_env: EngineEnv) -> None:
    result = launch(ctx, engine_env, extra_args=["--max-model-len", "4096"])
    d = check_diagnosis(result, "context_too_long")
    # vLLM wraps it in a pydantic ValidationError: the headline is the cause line.
    assert d["headline"].startswith("User-specified max_model_len (4096) is greater than")
    assert any("Value error, User-specified max_model_len" in line for line in d["evidence"])
    assert "at most 2048" in d["fix"]
    within_one_poll(ctx, result)


def test_kv_cache_too_small_for_the_models_length(ctx: ToolContext, engine_env: EngineEnv) -> None:
    env = {k: v for k, v in engine_env.server_env().items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    result = launch(ctx, engine_env, env=env, extra_args=["--kv-cache-memory-bytes", "262144"])
    d = check_diagnosis(result, "kv_cache_too_small")
    fits = re.search(r"estimated maximum model length is (\d+)", d["headline"])
    assert fits is not None, d["headline"]
    assert f"at most {fits.group(1)}" in d["fix"]
    within_one_poll(ctx, result)


def test_a_folder_that_is_not_a_model(ctx: ToolContext, engine_env: EngineEnv) -> None:
    folder = next(Path(r) for r in ctx.host("gpu").config.roots if "not-a-model" in r)
    result = launch(ctx, engine_env, model_path=str(folder))
    d = check_diagnosis(result, "weights_missing")
    assert "model folder with config.json" in d["fix"]
    within_one_poll(ctx, result)


def test_a_port_in_use(ctx: ToolContext, engine_env: EngineEnv) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = launch(ctx, engine_env, port=port)
    d = check_diagnosis(result, "port_in_use")
    assert f"port {port}" in d["headline"]
    assert result.data["outcome"] == "refused"


def test_an_interpreter_without_the_engine(
    ctx: ToolContext, engine_env: EngineEnv, sglang_src: SourceEnv
) -> None:
    # The SGLang source venv has no vLLM: a real environment without the engine.
    result = launch(ctx, engine_env, python=str(sglang_src.python))
    d = check_diagnosis(result, "engine_missing")
    assert str(sglang_src.python) in d["fix"]
    missing = launch(ctx, engine_env, python=str(engine_env.root / "no-such-venv/bin/python"))
    check_diagnosis(missing, "engine_missing")
