"""diagnose_log reads any server's log (a file inside the roots, or a systemd unit's journal)
and diagnoses it; `sleuth diagnose FILE|-` does the same for a local file or stdin."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.agent.calls import execute
from sleuth.cli import app
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.serving.log_source import TAIL_BYTES

CORPUS = Path(__file__).parent / "fixtures" / "engine_logs"
INDEX = {e["file"]: e for e in json.loads((CORPUS / "index.json").read_text())}
KV_LOG = "001-vllm-kv_cache_too_small.log"
SHM_LOG = "040-sglang-nccl.log"
runner = CliRunner()


def local_context(root: Path) -> ToolContext:
    config = HostConfig(roots=[str(root)])
    return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})


@pytest.mark.parametrize("host", ["local", "remote"])
def test_a_log_file_on_a_host_is_diagnosed_with_its_logged_numbers(
    host: str, tmp_path: Path, make_context: Callable[..., ToolContext]
) -> None:
    log = tmp_path / "vllm.log"
    shutil.copy(CORPUS / KV_LOG, log)
    ctx = make_context([str(tmp_path)])
    result = execute(ctx, "diagnose_log", {"host": host, "path": str(log)})
    assert result.ok, result.error
    found = result.data["diagnosis"]
    assert found["kind"] == INDEX[KV_LOG]["kind"] and found["confidence"] == "high"
    assert found["headline"] == INDEX[KV_LOG]["headline"]
    assert "at most 58496" in found["fix"]
    assert f"diagnosis: kv_cache_too_small: {found['headline']}" in result.output


def test_only_the_end_of_a_large_log_is_read_and_the_failure_there_is_found(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    filler = "INFO 01-01 00:00:00 [core.py:1] still loading, nothing wrong yet\n"
    with log.open("w") as out:
        out.write(filler * (2 * TAIL_BYTES // len(filler)))
        out.write((CORPUS / SHM_LOG).read_text())
    result = execute(local_context(tmp_path), "diagnose_log", {"path": str(log), "lines": 500})
    assert result.ok, result.error
    assert result.data["lines_read"] == 500
    assert result.data["diagnosis"]["kind"] == "nccl"
    assert "/dev/shm" in result.data["diagnosis"]["fix"]


def test_a_log_outside_the_roots_is_refused(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "x.log").write_text("ValueError: boom\n")
    result = execute(local_context(inside), "diagnose_log", {"path": str(outside / "x.log")})
    assert not result.ok and result.refused
    assert "outside the roots" in (result.error or "")


def test_a_units_journal_is_read_with_journalctl_as_an_argument_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in journalctl first on PATH: it records its argv and prints a real log.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "argv.json"
    fake = bin_dir / "journalctl"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(seen)!r}, 'w'))\n"
        f"sys.stdout.write(open({str(CORPUS / SHM_LOG)!r}).read())\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = execute(local_context(tmp_path), "diagnose_log", {"unit": "vllm.service"})
    assert result.ok, result.error
    assert json.loads(seen.read_text()) == [
        "--no-pager",
        "--output=cat",
        "--lines=2000",
        "--unit=vllm.service",
    ]
    assert result.data["diagnosis"]["kind"] == "nccl"
    assert result.argv == [["journalctl", *json.loads(seen.read_text())]]


@pytest.mark.parametrize("unit", ["--since=yesterday", "a b", "x;rm -rf /"])
def test_a_unit_that_is_not_a_unit_name_is_refused_before_anything_runs(
    unit: str, tmp_path: Path
) -> None:
    result = execute(local_context(tmp_path), "diagnose_log", {"unit": unit})
    assert not result.ok and result.argv == []
    assert "invalid input" in (result.error or "")


def test_path_and_unit_are_one_or_the_other(tmp_path: Path) -> None:
    both = execute(local_context(tmp_path), "diagnose_log", {"path": "x", "unit": "y.service"})
    neither = execute(local_context(tmp_path), "diagnose_log", {})
    assert not both.ok and not neither.ok
    assert "exactly one of path" in (both.error or "")


def test_the_cli_diagnoses_a_file_and_exits_0(tmp_path: Path) -> None:
    result = runner.invoke(app, ["diagnose", str(CORPUS / KV_LOG)])
    assert result.exit_code == 0, result.output
    assert "kv_cache_too_small" in result.output and "at most 58496" in result.output


def test_the_cli_reads_stdin_and_prints_json() -> None:
    text = (CORPUS / SHM_LOG).read_text()
    result = runner.invoke(app, ["diagnose", "-", "--json"], input=text)
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["diagnosis"]["kind"] == "nccl" and got["source"] == "-"
    assert got["diagnosis"]["headline"] == INDEX[SHM_LOG]["headline"]


def test_the_cli_exits_3_when_the_cause_is_unknown(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    shutil.copy(CORPUS / "006-vllm-unknown.log", log)
    result = runner.invoke(app, ["diagnose", str(log)])
    assert result.exit_code == 3, result.output
    assert "diagnosis: unknown: " in result.output and "SIGSEGV" in result.output
    assert "to be sure: " in result.output


def test_the_cli_help_shows_an_example() -> None:
    result = runner.invoke(app, ["diagnose", "--help"])
    assert result.exit_code == 0
    assert "Example: sleuth diagnose" in result.output
