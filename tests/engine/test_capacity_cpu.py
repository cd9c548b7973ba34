"""capacity_plan's "CPU KV cache size" against the real vLLM CPU build, digit for digit.

Four tiny models of different attention layouts (GQA, MHA, Gemma 2's alternating sliding
window, DeepSeek-V2's MLA; make_tiny_model.py) are launched with Sleuth's launch_server on
the vLLM CPU build with VLLM_CPU_KVCACHE_SPACE=1; the engine's KV line must equal the line
capacity_plan predicts offline (gpus=cpu), and the launch's own result must carry the same
prediction beside the report (kv_check).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from tests.engine.conftest import RemoteFactory, free_port
from tests.engine.engine_env import HERE, EngineEnv, locked, run

SHAPES = {"gqa": [], "mha": [], "swa": [], "mla": ["--block-size", "16"]}
BATCHED = ["--max-num-batched-tokens", "2048"]


def tiny_model(env: EngineEnv, shape: str) -> Path:
    """The shape's tiny model, written once per version of make_tiny_model.py."""
    if shape == "gqa":
        return env.model
    digest = hashlib.sha256((HERE / "make_tiny_model.py").read_bytes()).hexdigest()[:10]
    out = env.root / f"tiny-{shape}-{digest}"
    with locked(env.root.parent / f"{env.root.name}.tiny-{shape}.lock"):
        if not (out / "config.json").exists():
            partial = out.with_name(out.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            script = str(HERE / "make_tiny_model.py")
            run([str(env.python), script, str(partial), shape], env.root / "build.log")
            partial.rename(out)
    return out


@pytest.mark.parametrize("shape", list(SHAPES))
def test_predicted_cpu_kv_cache_line_is_the_engines(
    shape: str, engine_env: EngineEnv, remote_context: RemoteFactory
) -> None:
    model = tiny_model(engine_env, shape)
    ctx = remote_context([str(engine_env.root)])
    extra = BATCHED + SHAPES[shape]
    plan = execute(
        ctx,
        "capacity_plan",
        {
            "host": "gpu",
            "model_dir": str(model),
            "engine": "vllm",
            "gpus": "cpu",
            "cpu_kv_space_gib": 1,
            "max_num_batched_tokens": 2048,
            "engine_version": "0.32.0",
            **({"block_size": 16} if shape == "mla" else {}),
        },
    )
    assert plan.ok, plan.error
    (predicted,) = [x for x in plan.data["engine_account"]["lines"] if "KV cache size" in x]
    launch = execute(
        ctx,
        "launch_server",
        {
            "host": "gpu",
            "engine": "vllm",
            "model_path": str(model),
            "port": free_port(),
            "python": str(engine_env.python),
            "env": engine_env.server_env(),
            "extra_args": extra,
            "timeout_s": 900,
            "poll_s": 1.0,
        },
    )
    try:
        stages = {m["name"]: m["line"] for m in launch.data.get("milestones", [])}
        reported = stages.get("KV cache allocated", "")
        assert reported.endswith(predicted), (reported, predicted, launch.output[-3000:])
        check = launch.data["kv_check"]
        assert check["predicted_tokens"] == check["reported_tokens"]
        assert "KV cache: the engine reports" in launch.output
    finally:
        if launch.data.get("server_id") and launch.ok:
            execute(ctx, "stop_server", {"host": "gpu", "server_id": launch.data["server_id"]})
