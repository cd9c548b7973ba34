"""A host whose sshd has no SFTP subsystem (hardened servers): every file tool gives the same
results as over SFTP, by exec with POSIX tools, and `sleuth hosts --check` says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.errors import ErrorKind
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import NO_SFTP, SSHHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx
from tests.sshd import SSHServer

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("no_sftp")
    root = base / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "server_args.py").write_text(
        "".join(f"line {i}\n" for i in range(1, 300)) + 'FLAG = "--speculative-algorithm"\n'
    )
    (root / "config.json").write_text(json.dumps({"text_config": {"num_experts": 64}}))
    (root / "odd name $(x).txt").write_text("odd\n")
    (root / "link_in.py").symlink_to(root / "src" / "server_args.py")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (root / "link_out").symlink_to(base / "outside")
    fx.tiny_deepseek_mtp(root / "ds")
    fx.tiny_nvfp4(root / "nvfp4")
    return root


def sandbox(
    name: str, server: SSHServer, root: Path, tmp: Path, python: str, calls: Any = "resident"
) -> SandboxedHost:
    host = SSHHost(
        name,
        server.alias,
        known_hosts=tmp / f"{name}_known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
        calls=calls,
    )
    return SandboxedHost(name, host, HostConfig(roots=[str(root)], python=python), Limits())


@pytest.fixture(params=["python3", "no-such-python3"])
def ctx(
    request: pytest.FixtureRequest,
    sshd: SSHServer,
    sshd_no_sftp: SSHServer,
    tree: Path,
    tmp_path: Path,
    ssh_calls: str,
) -> Iterator[ToolContext]:
    """Host "sftp" on the usual server, host "exec" on one without the subsystem; without a
    python3 the file tools use POSIX tools and the checkpoint tools read headers by range
    over the host's file access."""
    python = request.param
    hosts = {
        "sftp": sandbox("sftp", sshd, tree, tmp_path, python, ssh_calls),
        "exec": sandbox("exec", sshd_no_sftp, tree, tmp_path, python, ssh_calls),
    }
    context = ToolContext(hosts=hosts)
    yield context
    context.close()


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_lines", {"path": "src/server_args.py", "start": 290, "end": 310}),
    ("read_lines", {"path": "link_in.py", "start": 1, "end": 3}),
    ("read_lines", {"path": "odd name $(x).txt"}),
    ("read_lines", {"path": "missing.txt"}),
    ("read_lines", {"path": "link_out/secret.txt"}),
    ("read_lines", {"path": "/etc/hostname"}),
    ("list_dir", {"path": ".", "depth": 2}),
    ("list_dir", {"path": "src"}),
    ("read_json", {"path": "config.json", "pointer": "/text_config/num_experts"}),
    ("read_json", {"path": "config.json"}),
    ("grep", {"pattern": "speculative", "path": "src"}),
    ("grep", {"pattern": "line 7$", "path": "src/server_args.py", "context": 1}),
    ("checkpoint_summary", {"model_dir": "ds"}),
    ("checkpoint_summary", {"model_dir": "nvfp4"}),
    ("safetensors_header", {"path": "nvfp4/model.safetensors"}),
]
CHECKPOINT_VOLATILE = ("bytes_over_wire", "duration_s")


def neutral(text: str | None, host: str) -> str | None:
    """The text with the host's name taken out, so two hosts' messages compare."""
    return (
        None
        if text is None
        else text.replace(f"'{host}'", "'H'").replace(f"hosts.{host}]", "hosts.H]")
    )


def comparable(name: str, data: Any, host: str) -> Any:
    if name == "checkpoint_summary" and isinstance(data, dict):
        kept = {k: v for k, v in data.items() if k not in CHECKPOINT_VOLATILE}
        kept["warnings"] = [neutral(w, host) for w in kept.get("warnings", [])]
        return kept
    return data


@pytest.mark.parametrize(
    ("name", "inputs"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)]
)
def test_every_file_tool_answers_the_same_without_sftp(
    ctx: ToolContext, name: str, inputs: dict[str, Any]
) -> None:
    over_sftp = execute(ctx, name, {"host": "sftp", **inputs})
    over_exec = execute(ctx, name, {"host": "exec", **inputs})
    assert over_exec.ok == over_sftp.ok
    assert over_exec.error_kind == over_sftp.error_kind
    assert neutral(over_exec.output, "exec") == neutral(over_sftp.output, "sftp")
    assert neutral(over_exec.error, "exec") == neutral(over_sftp.error, "sftp")
    assert comparable(name, over_exec.data, "exec") == comparable(name, over_sftp.data, "sftp")
    exec_host = ctx.host("exec").host
    assert isinstance(exec_host, SSHHost)
    if ctx.host("exec").config.python == "python3":  # Sleuth's program reads; SFTP is unused
        assert exec_host.notes == [] and exec_host.call_mode() != "posix"
    else:
        assert exec_host.file_access == "exec"
        assert exec_host.notes == [f"host 'exec': {NO_SFTP}"]


def test_the_checkpoint_probe_without_python_reads_only_headers_over_exec(
    sshd_no_sftp: SSHServer, tree: Path, tmp_path: Path
) -> None:
    exec_host = sandbox("exec", sshd_no_sftp, tree, tmp_path, "no-such-python3")
    ctx = ToolContext(hosts={"exec": exec_host})
    host = ctx.host("exec").host
    assert isinstance(host, SSHHost)
    before = host.bytes_read_sftp
    result = execute(ctx, "checkpoint_summary", {"host": "exec", "model_dir": "ds"})
    assert result.ok, result.error
    headers = sum(
        8 + int.from_bytes(p.read_bytes()[:8], "little")
        for p in (tree / "ds").glob("*.safetensors")
    )
    assert host.bytes_read_sftp - before >= headers
    assert result.data["bytes_read_on_host"] == host.bytes_read_sftp - before
    assert result.data["via"] == "sftp"  # the probe's name for its range-read path
    ctx.close()


def test_a_missing_file_is_a_not_found_error_on_both(ctx: ToolContext, tree: Path) -> None:
    for name in ("sftp", "exec"):
        host = ctx.host(name).host
        with pytest.raises(Exception) as raised:
            host.read_range(str(tree / "nothing.bin"), 0, 8)
        assert getattr(raised.value, "kind", None) is ErrorKind.NOT_FOUND


def sleuth(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hosts_check_warns_about_the_exec_fallback_without_a_traceback(
    sshd_no_sftp: SSHServer, tmp_path: Path
) -> None:
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/sleuth_known_hosts"\n\n'
        f'[hosts.hardened]\nssh = "{sshd_no_sftp.alias}"\nroots = ["{tmp_path}"]\n'
    )
    as_json = sleuth(["hosts", "--check", "--json"], tmp_path, sshd_no_sftp.home)
    assert as_json.returncode == 0, as_json.stderr
    row = {r["name"]: r for r in json.loads(as_json.stdout)}["hardened"]
    assert row["ok"] and row["warnings"] == [NO_SFTP] and row["file_access"] == "exec"
    assert row["call_mode"] == "resident"
    assert row["roots_found"] == {str(tmp_path): "dir"}
    table = sleuth(["hosts", "--check"], tmp_path, sshd_no_sftp.home)
    assert table.returncode == 0 and "Traceback" not in table.stdout + table.stderr
    shown = " ".join(table.stdout.replace("│", " ").split())
    assert f"warning: {NO_SFTP}" in shown and "file tools: resident" in shown
