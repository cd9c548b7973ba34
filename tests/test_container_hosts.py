"""Container hosts (issue 40): a real podman container, reached locally and through the test
sshd as the via host, answers every read tool about itself, and nothing outside its roots."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.container.host import ContainerHost
from sleuth.tools.context import ToolContext
from tests.container_support import (
    ONLY_HERE,
    SGLANG_VERSION,
    SITE,
    WORKSPACE,
    EngineBox,
    box_context,
    engine_box,
    via_host,
)
from tests.sshd import SSHServer
from tests.test_cli_tools import sleuth

__all__ = ["engine_box"]

pytestmark = pytest.mark.ssh


@pytest.fixture(params=["local", "ssh"])
def ctx(
    request: pytest.FixtureRequest, engine_box: EngineBox, tmp_path: Path
) -> Iterator[ToolContext]:
    sshd: SSHServer | None = None
    if request.param == "ssh":
        sshd = request.getfixturevalue("sshd")
    context = box_context(engine_box.name, via_host(request.param, sshd, tmp_path))
    yield context
    context.close()


def call(ctx: ToolContext, tool: str, **args: Any) -> dict[str, Any]:
    result = execute(ctx, tool, {"host": "box", **args})
    assert result.ok, result.error
    data: dict[str, Any] = result.data
    return data


def refused(ctx: ToolContext, tool: str, **args: Any) -> str:
    result = execute(ctx, tool, {"host": "box", **args})
    assert not result.ok, result.output
    return str(result.error)


def container_host(ctx: ToolContext) -> ContainerHost:
    host = ctx.host("box").host
    assert isinstance(host, ContainerHost)
    return host


def test_python_env_is_the_containers(ctx: ToolContext) -> None:
    env = call(ctx, "python_env")
    sglang = next(p for p in env["packages"] if p["name"] == "sglang")
    assert sglang["installed"] and sglang["version"] == SGLANG_VERSION
    assert sglang["path"] == f"{SITE}/sglang" and sglang["inside_roots"]
    assert not os.path.exists(f"{SITE}/sglang")  # this machine has none: it was the container


def test_grep_and_read_find_a_file_only_the_container_has(ctx: ToolContext) -> None:
    assert not os.path.exists(f"{WORKSPACE}/only-here.txt")
    found = call(ctx, "grep", path=WORKSPACE, pattern=ONLY_HERE)
    assert found["files"] == [f"{WORKSPACE}/only-here.txt"] and found["matches"] == 1
    lines = execute(ctx, "read_lines", {"host": "box", "path": f"{WORKSPACE}/only-here.txt"})
    assert f"1\t{ONLY_HERE}" in lines.output
    listed = call(ctx, "list_dir", path=WORKSPACE)
    assert {"only-here.txt", "to-etc", "sub"} <= {e["name"] for e in listed["entries"]}
    # one resident program served every read: one exec for the session, not one per call
    assert container_host(ctx).programs.starts == 1


def test_checkpoint_tools_read_the_mounted_checkpoint(
    ctx: ToolContext, engine_box: EngineBox
) -> None:
    inside = call(ctx, "checkpoint_summary", model_dir="/models/tiny")
    here = execute(
        ctx, "checkpoint_summary", {"host": "local", "model_dir": str(engine_box.checkpoint)}
    )
    assert inside["via"] == "host-python"  # Sleuth's program read it, in the container
    compared = ("tensor_count", "dtypes", "params", "mtp", "quantization", "warnings")
    assert {k: inside[k] for k in compared} == {k: here.data[k] for k in compared}
    assert inside["tensor_count"] > 0
    shard = "model-00001-of-00007.safetensors"
    header = call(ctx, "safetensors_header", path=f"/models/tiny/{shard}")
    assert header["tensor_count"] > 0
    config = execute(ctx, "read_json", {"host": "box", "path": "/models/tiny/config.json"})
    assert config.ok and "deepseek_v3" in config.output


def test_preflight_sees_the_containers_shm_and_engine(ctx: ToolContext) -> None:
    report = call(ctx, "preflight", engine="sglang", model_path="/models/tiny", tp=2)
    checks = {check["name"]: check for check in report["checks"]}
    here = os.statvfs("/dev/shm")
    assert here.f_bavail * here.f_frsize > 1 << 30  # this machine's would pass
    assert checks["dev_shm"]["status"] == "fail"
    assert "/dev/shm has 96 MiB free for 2 GPU processes" in checks["dev_shm"]["detail"]
    # the container's sglang (this machine has none), short of the kernels a real image has
    assert f"sglang {SGLANG_VERSION} imports sgl_kernel" in checks["engine_installed"]["detail"]


def test_gpu_info_and_capacity_plan_run_inside(ctx: ToolContext, engine_box: EngineBox) -> None:
    gpus = execute(ctx, "gpu_info", {"host": "box"})
    assert gpus.ok and "nvidia-smi is not installed" in gpus.output  # not in the container
    asked = {"gpus": "1xH100-80G"}
    plan = execute(ctx, "capacity_plan", {"host": "box", "model_dir": "/models/llama", **asked})
    assert plan.ok, plan.error
    llama = str(engine_box.checkpoint.parent / "llama")
    here = execute(ctx, "capacity_plan", {"host": "local", "model_dir": llama, **asked})
    assert here.ok, here.error
    compared = ("verdict", "weight_bytes_total", "kv_bytes_per_token_per_gpu", "max_kv_tokens")
    assert {k: plan.data[k] for k in compared} == {k: here.data[k] for k in compared}
    assert plan.data["weight_bytes_total"] > 100e9  # Llama-3-70B's headers, read in the container


def test_server_processes_are_the_containers(ctx: ToolContext) -> None:
    found = call(ctx, "server_processes")
    engines = [p for p in found["processes"] if p["engine"] == "sglang"]
    assert len(engines) == 1
    assert "/models/tiny" in engines[0]["argv"]
    assert engines[0]["pid"] == 1  # the container's own pid namespace


@pytest.mark.parametrize(
    "path",
    [
        "/secret-outside.txt",
        f"{WORKSPACE}/../secret-outside.txt",
        f"{WORKSPACE}/to-etc/passwd",
        f"{WORKSPACE}/sub/passwd",
        "/etc/passwd",
    ],
)
def test_no_read_leaves_the_roots(ctx: ToolContext, path: str) -> None:
    assert "outside the roots" in refused(ctx, "read_lines", path=path)


def test_grep_does_not_follow_a_link_out(ctx: ToolContext) -> None:
    found = call(ctx, "grep", path=WORKSPACE, pattern="root:")
    assert found["matches"] == 0  # /etc/passwd through to-etc and sub/passwd is not read


def test_launch_and_stop_are_refused_on_a_container(ctx: ToolContext) -> None:
    for tool, args in [
        ("stop_server", {"server_id": "srv-20260101-000000-abcdef"}),
        ("launch_server", {"engine": "sglang", "model_path": "/models/tiny"}),
    ]:
        message = refused(ctx, tool, **args)
        assert "Sleuth does not start, stop or restart someone else's container" in message


def test_the_exec_carries_no_environment(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_SECRET_TOKEN", "hunter2-must-not-cross")
    done = ctx.host("box").run(["cat", "/proc/self/environ"])
    assert b"hunter2" not in done.stdout and b"SLEUTH_SECRET_TOKEN" not in done.stdout
    assert b"PATH=" in done.stdout  # the container's own environment


def test_describe_records_via_runtime_and_container(
    ctx: ToolContext, engine_box: EngineBox
) -> None:
    facts = container_host(ctx).describe()
    assert facts.call_mode == "resident"
    assert facts.container["runtime"] == "podman"
    assert facts.container["container"] == engine_box.name
    assert facts.container["via"] in ("local", "gpu1")
    assert len(facts.container["container_id"]) == 64
    assert facts.container["state"] == "running"


def test_a_transcript_records_via_runtime_container_and_image(
    engine_box: EngineBox, sshd: SSHServer, tmp_path: Path
) -> None:
    """`sleuth tool` on a container host configured in sleuth.toml, through the test sshd:
    the session's header says exactly which container (id, image) every call read."""
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/sleuth_known_hosts"\n\n'
        f'[hosts.gpu1]\nssh = "{sshd.alias}"\n\n'
        f'[hosts.box]\nvia = "gpu1"\ncontainer = "{engine_box.name}"\nruntime = "podman"\n'
        f'roots = ["{WORKSPACE}"]\n'
    )
    args = ["tool", "grep", f"path={WORKSPACE}", f"pattern={ONLY_HERE}", "--host", "box"]
    done = sleuth([*args, "--json", "--no-sign", "--transcripts", "tr"], tmp_path, sshd.home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"]["files"] == [f"{WORKSPACE}/only-here.txt"]
    (transcript,) = (tmp_path / "tr").glob("*.jsonl")
    started = json.loads(transcript.read_text().splitlines()[0])
    box = next(h for h in started["hosts"] if h["name"] == "box")
    assert box["call_mode"] == "resident"
    assert box["container"]["via"] == "gpu1" and box["container"]["runtime"] == "podman"
    assert box["container"]["container"] == engine_box.name
    assert len(box["container"]["container_id"]) == 64
    assert box["container"]["image"].startswith("rootfs ")  # run from a tree, not an image
    assert box["address"] == f"podman:{engine_box.name} via gpu1"
