"""launch_server runs preflight before it starts anything: a launch the checks show would fail
is refused with their diagnosis and nothing starts; a launch they pass starts, with the
checks in its data."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision
from sleuth.tools.context import ToolContext
from sleuth.transcripts.results import ToolResult
from tests.test_preflight import World, free_port, llama

SERVER = str(Path(__file__).with_name("streaming_server.py"))
STAND_IN = """#!/bin/sh
# An SGLang environment: `-m sglang.launch_server` serves the synthetic engine; anything else
# (the preflight probe) runs Python over the installed SGLang's files.
if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then
  port=
  while [ $# -gt 0 ]; do if [ "$1" = --port ]; then port=$2; fi; shift; done
  exec {python} {server} --port "$port" --ready-line
fi
PYTHONPATH={site} exec {python} "$@"
"""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    w = World(tmp_path, monkeypatch, {"engine": "sglang"})
    w.engine("sglang", "0.4.2")
    python = Path(w.args["python"])
    python.write_text(STAND_IN.format(python=sys.executable, server=SERVER, site=w.site))
    return w


def context(root: Path) -> ToolContext:
    config = HostConfig(roots=[str(root)], allow=["launch_server", "stop_server"])
    host = SandboxedHost("local", LocalHost(), config, Limits())
    return ToolContext(
        hosts={"local": host}, approver=lambda r: ApprovalDecision(approved=True, by="test")
    )


def servers_on(ctx: ToolContext, port: int) -> set[str]:
    """Servers Sleuth started on this port. The state folder is shared with every test, and a
    port an earlier test's server freed can be drawn again: compare before and after."""
    listed = execute(ctx, "server_status", {"host": "local"})
    return {s["server_id"] for s in listed.data["servers"] if s["port"] == port}


def launch(ctx: ToolContext, world: World) -> ToolResult:
    world.args.setdefault("port", free_port())
    args = {**world.args, "timeout_s": 30, "poll_s": 0.1}
    return execute(ctx, "launch_server", args)


def test_a_launch_preflight_says_would_fail_is_refused_and_nothing_starts(world: World) -> None:
    world.model(llama(40, 8, architectures=["Qwen2ForCausalLM"]))
    world.args["tp"] = 3
    world.args["port"] = free_port()
    ctx = context(world.root)
    before = servers_on(ctx, world.args["port"])
    result = launch(ctx, world)
    assert not result.ok
    assert result.data["outcome"] == "refused"
    assert result.data["diagnosis"]["kind"] == "tp_divisibility"
    assert result.data["preflight"]["blocked"] is True
    assert "40 attention heads" in result.output
    assert "server_id" not in result.data
    assert servers_on(ctx, world.args["port"]) == before


def test_a_launch_preflight_passes_starts_and_carries_its_checks(world: World) -> None:
    world.model(llama())
    ctx = context(world.root)
    result = launch(ctx, world)
    assert result.ok, result.output
    assert result.data["ready"] and result.data["preflight"]["blocked"] is False
    checks = result.data["preflight"]["checks"]
    passed = {c["name"] for c in checks if c["status"] == "pass"}
    assert {"engine_installed", "port_free", "heads_divisible_by_tp", "shards"} <= passed
    stop = execute(ctx, "stop_server", {"host": "local", "server_id": result.data["server_id"]})
    assert stop.ok and stop.data["gone"]


def test_preflight_false_launches_without_the_checks(world: World) -> None:
    world.model(llama(40, 8, architectures=["Qwen2ForCausalLM"]))
    world.args.update(tp=3, preflight=False)
    ctx = context(world.root)
    result = launch(ctx, world)
    assert result.ok, result.output
    assert "preflight" not in result.data
    execute(ctx, "stop_server", {"host": "local", "server_id": result.data["server_id"]})


OOM_STAND_IN = """#!/bin/sh
# An SGLang that loads its weights, then runs out of GPU memory in the profile run.
if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then
  echo '[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, avail mem=1.00 GB'
  echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0' \
    'has a total capacity of 79.00 GiB of which 1.00 GiB is free.'
  exit 1
fi
PYTHONPATH={site} exec {python} "$@"
"""


def test_a_memory_failure_is_cross_checked_with_the_capacity_rules(world: World) -> None:
    world.gpus("NVIDIA H100 80GB HBM3", "9.0")
    world.model(llama())
    python = Path(world.args["python"])
    python.write_text(OOM_STAND_IN.format(python=sys.executable, site=world.site))
    result = launch(context(world.root), world)
    assert not result.ok and result.data["outcome"] in ("failed", "exited")
    diagnosis = result.data["diagnosis"]
    assert diagnosis["kind"] == "oom_activation", diagnosis
    assert "2.00 GiB" in diagnosis["fix"]
    assert "the capacity rules gave, before the launch:" in diagnosis["fix"]
    assert "GiB of weights per GPU" in diagnosis["fix"]
