"""`sleuth replay` and `sleuth resume` read their transcript once: one pass over the file serves
the verification, the events, the hosts to connect to and the writer that continues it."""

from __future__ import annotations

import builtins
import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.config import HostConfig, Settings
from sleuth.tools.context import build_context
from sleuth.transcripts.events import ModelTurn
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI
from tests.test_agent_anthropic import workspace
from tests.test_replay import record, script

__all__ = ["workspace"]
ONE_READ = [f"os.open {os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC:#o}"]
"""The one opening of the file: as itself, never through a link (`safe_files.read_file`)."""
REFERENCES = sorted((Path(__file__).resolve().parent.parent / "transcripts").glob("*.jsonl"))
runner = CliRunner()


@contextmanager
def reads_of(path: Path) -> Iterator[list[str]]:
    """A list that gets one entry per opening of `path` for reading while the block runs, by
    `open`, `Path.open`/`read_bytes` (through `io.open`) or `os.open`."""
    target = os.path.realpath(path)
    opened: list[str] = []
    real_open, real_os_open = io.open, os.open

    def same(file: Any) -> bool:
        named = isinstance(file, str | bytes | os.PathLike)
        return named and os.path.realpath(file) == target

    def counting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if same(file) and ("r" in mode or "+" in mode):
            opened.append(f"open {mode}")
        return real_open(file, mode, *args, **kwargs)

    def counting_os_open(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if same(file) and flags & os.O_ACCMODE != os.O_WRONLY:
            opened.append(f"os.open {flags:#o}")
        return real_os_open(file, flags, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(io, "open", counting_open)
        patch.setattr(builtins, "open", counting_open)
        patch.setattr(os, "open", counting_os_open)
        yield opened


def _config(tmp_path: Path, workspace: Path) -> Path:
    config = tmp_path / "sleuth.toml"
    config.write_text(f'[hosts.local]\nroots = ["{workspace}"]\n')
    return config


def _recorded(workspace: Path, tmp_path: Path) -> Path:
    settings = Settings(hosts={"local": HostConfig(roots=[str(workspace)])})
    return record(build_context(settings, []), tmp_path / "t", host="local")


@pytest.mark.parametrize("live", [False, True], ids=["offline", "live"])
def test_sleuth_replay_reads_the_transcript_once(
    workspace: Path, tmp_path: Path, live: bool
) -> None:
    path = _recorded(workspace, tmp_path)
    args = ["replay", str(path), "--json"]
    args += ["--live", "--config", str(_config(tmp_path, workspace))] if live else []
    with reads_of(path) as opened:
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] and json.loads(result.stdout)["mode"] == (
        "live" if live else "offline"
    )
    assert opened == ONE_READ


@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.stem)
def test_each_reference_transcript_replays_from_one_read(path: Path) -> None:
    with reads_of(path) as opened:
        result = runner.invoke(app, ["replay", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert opened == ONE_READ


def test_sleuth_resume_reads_the_transcript_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _recorded(workspace, tmp_path)
    events = load(path).events
    second = next(e.seq for e in events if isinstance(e, ModelTurn) and e.turn == 2)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:second]))  # killed before the second model turn
    config = _config(tmp_path, workspace)
    with ScriptedAPI(script("local")[1:]) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-reads")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        with reads_of(path) as opened:
            args = ["resume", str(path), "--json", "--config", str(config), "--base-url", api.url,
                    "--trust-unsigned"]  # fmt: skip
            result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "answered"
    assert opened == ONE_READ
    assert verify(path).ok and verify(path).ended
