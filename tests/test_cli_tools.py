"""`sleuth tool`, `sleuth tools` and `sleuth hosts` as a user runs them, locally and over SSH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sshd import SSHServer


def sleuth(
    args: list[str], cwd: Path, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("ANTHROPIC_API_KEY", None)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path, sshd: SSHServer) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "server_args.py").write_text(
        "".join(f"line {i}\n" for i in range(1, 11)) + 'FLAG = "--speculative-algorithm"\n'
    )
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/sleuth_known_hosts"\n\n'
        f'[hosts.gpu1]\nssh = "{sshd.alias}"\nroots = ["{tmp_path}"]\n'
    )
    return tmp_path


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def test_tool_json_is_the_tool_result_and_local_equals_remote(
    project: Path, sshd: SSHServer
) -> None:
    args = ["tool", "read_lines", "path=src/server_args.py", "start=9", "end=11", "--json"]
    local = sleuth(args, project, sshd.home)
    remote = sleuth([*args, "--host", "gpu1"], project, sshd.home)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    here, there = as_json(local), as_json(remote)
    assert {"ok", "output", "data", "error"} <= set(here)
    assert here["ok"] is True and here["error"] is None
    assert '    11\tFLAG = "--speculative-algorithm"' in here["output"]
    assert (here["output"], here["data"]) == (there["output"], there["data"])


def test_a_refused_tool_exits_non_zero_and_says_how_to_widen(project: Path) -> None:
    proc = sleuth(["tool", "read_lines", "path=/etc/passwd", "--json"], project)
    assert proc.returncode == 3  # refused by the sandbox, as the README's exit codes say
    result = as_json(proc)
    assert result["ok"] is False and result["error_kind"] == "policy"
    assert "outside the roots" in result["error"]
    assert "root:" not in result["output"]


def test_bad_arguments_are_usage_errors(project: Path) -> None:
    proc = sleuth(["tool", "read_lines", "src/server_args.py"], project)
    assert proc.returncode == 2 and "is not key=value" in proc.stderr
    unknown = sleuth(["tool", "no_such_tool", "path=x", "--json"], project)
    assert unknown.returncode == 2 and "available:" in unknown.stderr


def test_tools_lists_schemas_with_host_first(project: Path) -> None:
    tools = as_json(sleuth(["tools", "--json"], project))
    by_name = {t["name"]: t for t in tools}
    assert {
        "read_lines",
        "grep",
        "list_dir",
        "read_json",
        "checkpoint_summary",
        "safetensors_header",
        "python_env",
        "gpu_info",
        "launch_server",
        "run_benchmark",
    } <= set(by_name)
    for spec in tools:
        assert next(iter(spec["input_schema"]["properties"])) == "host"
        assert spec["description"]
    assert by_name["launch_server"]["mutating"] and not by_name["grep"]["mutating"]


def test_unknown_host_key_is_refused_then_accepted_with_the_flag(
    project: Path, sshd: SSHServer
) -> None:
    home = project / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(sshd.ssh_config_path.read_text())
    args = ["tool", "list_dir", "--host", "gpu1", "--json"]
    refused = sleuth(args, project, home)
    assert refused.returncode == 1
    error = as_json(refused)["error"] if refused.stdout else refused.stderr
    assert sshd.host_key_fingerprint in error and "--accept-new-host-key" in error
    accepted = sleuth([*args, "--accept-new-host-key"], project, home)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"[127.0.0.1]:{sshd.port}" in (project / "sleuth_known_hosts").read_text()
    again = sleuth(args, project, home)
    assert again.returncode == 0 and as_json(again)["ok"]


def test_hosts_check_reports_latency_user_key_and_roots(project: Path, sshd: SSHServer) -> None:
    proc = sleuth(["hosts", "--check", "--json"], project, sshd.home)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in as_json(proc)}
    gpu1 = rows["gpu1"]
    assert gpu1["ok"] and gpu1["latency_ms"] > 0
    assert gpu1["user"] == sshd.user and gpu1["host_key_type"] == "ED25519"
    assert gpu1["host_key_fingerprint"] == sshd.host_key_fingerprint
    assert gpu1["roots_found"] == {str(project): "dir"}
    assert rows["local"]["ok"]


def test_bench_on_a_remote_host_needs_its_permission(project: Path, sshd: SSHServer) -> None:
    proc = sleuth(
        ["bench", "http://127.0.0.1:9", "-m", "m", "-c", "1", "--host", "gpu1"],
        project,
        sshd.home,
    )
    assert proc.returncode == 1
    assert "not allowed on host 'gpu1'" in proc.stderr and 'allow = ["run_benchmark"]' in " ".join(
        proc.stderr.replace("'", '"').split()
    )
