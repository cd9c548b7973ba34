"""checkpoint_summary and safetensors_header over SSH (real sshd): same answers, bytes counted."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx
from tests.test_checkpoints import big_checkpoint, metadata_bytes

__all__ = ["big_checkpoint"]

pytestmark = pytest.mark.ssh

COMPARED = (
    "tensor_count",
    "dtypes",
    "params",
    "weight_map",
    "mtp",
    "consistency",
    "warnings",
    "errors",
    "config",
    "quantization",
    "bytes_read_on_host",
)


def run(ctx: ToolContext, host: str, tool: str, **args: Any) -> dict[str, Any]:
    result = execute(ctx, tool, {"host": host, **args})
    assert result.ok, result.error
    data: dict[str, Any] = result.data
    return data


def remote(ctx: ToolContext) -> SSHHost:
    host = ctx.host("remote").host
    assert isinstance(host, SSHHost)
    return host


def test_summary_over_ssh_python_equals_local(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    ctx = make_context([str(tmp_path)])
    local = run(ctx, "local", "checkpoint_summary", model_dir=str(folder))
    before = remote(ctx).bytes_read_sftp
    over = run(ctx, "remote", "checkpoint_summary", model_dir=str(folder))
    assert over["via"] == "host-python"
    assert {k: over[k] for k in COMPARED} == {k: local[k] for k in COMPARED}
    assert remote(ctx).bytes_read_sftp - before == 0  # the host read; nothing came by SFTP


def test_summary_without_python_uses_sftp_and_reads_only_headers(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    ctx = make_context([str(tmp_path)])
    ctx.host("remote").config.python = "no-such-python3"
    local = run(ctx, "local", "checkpoint_summary", model_dir=str(folder))
    before = remote(ctx).bytes_read_sftp
    over = run(ctx, "remote", "checkpoint_summary", model_dir=str(folder))
    assert over["via"] == "sftp"
    note = over["warnings"].pop(0)  # the one difference: the slower path says why it ran
    assert note.startswith("fell back to the sftp path") and "no-such-python3" in note
    assert {k: over[k] for k in COMPARED} == {k: local[k] for k in COMPARED}
    expected = metadata_bytes(folder)
    assert remote(ctx).bytes_read_sftp - before == expected == over["bytes_read_on_host"]


def test_header_over_ssh_reads_8_plus_header_bytes(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    folder = tmp_path / "nvfp4"
    fx.tiny_nvfp4(folder)
    path = folder / "model.safetensors"
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    ctx = make_context([str(tmp_path)])
    host = remote(ctx)
    before = host.bytes_read_sftp + host.programs.payload_bytes
    data = run(ctx, "remote", "safetensors_header", path=str(path))
    assert host.bytes_read_sftp + host.programs.payload_bytes - before == 8 + n
    assert data == run(ctx, "local", "safetensors_header", path=str(path))


def test_big_checkpoint_over_ssh_sends_under_1mb(
    big_checkpoint: Path, make_context: Callable[..., ToolContext]
) -> None:
    ctx = make_context([str(big_checkpoint.parent)])
    over = run(ctx, "remote", "checkpoint_summary", model_dir=str(big_checkpoint))
    assert over["via"] == "host-python"
    assert over["bytes_over_wire"] < 1_000_000
    assert over["bytes_read_on_host"] == metadata_bytes(big_checkpoint)
    assert over["tensor_count"] > 370_000 and over["warnings"] == []


def test_corrupt_shard_over_ssh_is_reported_not_raised(
    tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    folder = tmp_path / "ds"
    fx.tiny_deepseek_mtp(folder)
    shard = sorted(folder.glob("model-*.safetensors"))[0]
    shard.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    ctx = make_context([str(tmp_path)])
    over = run(ctx, "remote", "checkpoint_summary", model_dir=str(folder))
    assert any("exceeds" in e and shard.name in e for e in over["errors"])
