"""A malformed shard among many: reported on the fast path, and any slower path says why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx


def _local(root: Path) -> ToolContext:
    config = HostConfig(roots=[str(root)])
    return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})


def _twelve_shards(folder: Path, bad_at: int) -> str:
    """Twelve shards (enough for the probe to fork workers); one is not safetensors."""
    folder.mkdir(parents=True)
    tensors = {f"model.layers.{i}.mlp.w.weight": ("BF16", [64, 64]) for i in range(24)}
    shards = fx.write_sharded(folder, tensors, 2 * 64 * 64 * 2)
    assert len(shards) == 12
    bad = sorted(shards)[bad_at]
    fx.corrupt(folder / bad, 8, b"[not json")
    return bad


@pytest.mark.parametrize("bad_at", [0, 1, 2])
def test_malformed_shard_is_reported_on_the_fast_path(tmp_path: Path, bad_at: int) -> None:
    # The forked workers take the first shards while this process parses the index, so an
    # early malformed shard is met by a worker: it used to crash the probe (KeyError 'groups').
    bad = _twelve_shards(tmp_path / "m", bad_at)
    result = execute(_local(tmp_path), "checkpoint_summary", {"model_dir": str(tmp_path / "m")})
    assert result.ok, result.error
    assert result.data["via"] == "local-python"
    assert result.data["shards"]["invalid"] == 1
    assert result.data["tensor_count"] == 24
    (error,) = [e for e in result.data["errors"] if bad in e]
    assert "header does not start with '{'" in error
    assert not any("fell back" in w for w in result.data["warnings"])
    assert f"ERROR: {bad}" in result.output


@pytest.mark.ssh
def test_a_fallback_to_a_slower_path_says_why(
    tmp_path: Path, ssh_host_factory: Callable[..., SandboxedHost]
) -> None:
    bad = _twelve_shards(tmp_path / "m", 3)
    remote = ssh_host_factory("remote", [str(tmp_path)])
    remote.config.python = "no-such-python3"
    ctx = ToolContext(hosts={"remote": remote})
    result = execute(
        ctx, "checkpoint_summary", {"host": "remote", "model_dir": str(tmp_path / "m")}
    )
    assert result.ok, result.error
    assert result.data["via"] == "sftp"
    (note,) = [w for w in result.data["warnings"] if "fell back" in w]
    assert "fell back to the sftp path" in note and "no-such-python3" in note
    assert f"WARNING: {note}" in result.output
    assert any(bad in e for e in result.data["errors"])
