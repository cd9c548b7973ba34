"""Crash and resume: `sleuth ask` is killed with SIGKILL mid-investigation; the prefix verifies,
and `sleuth resume` finishes the run in the same file with a fresh model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.replay.run import replay
from sleuth.transcripts.events import SessionEnded, SessionStarted
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, finding, message, stall, text, tool_use
from tests.test_agent_anthropic import workspace

__all__ = ["workspace"]
pytestmark = pytest.mark.ssh
NEXTN = "class DeepseekV3ForCausalLMNextN(torch.nn.Module):"
FIRST = message(
    text("Reading."),
    tool_use("toolu_cfg", "read_json", host="gpu", path="config.json", pointer="/architectures"),
    tool_use("toolu_src", "read_lines", host="gpu", path="src/model.py"),
)
REST = [
    message(finding("toolu_f1", "The source defines a NextN class.", [("toolu_src", NEXTN)])),
    message(text("Yes.")),
]


@pytest.fixture
def project(tmp_path: Path, workspace: Path, sshd: Any) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "sleuth.toml").write_text(
        f'[hosts.gpu]\nssh = "{sshd.alias}"\nroots = ["{workspace}"]\n'
    )
    return cwd


def sleuth(args: list[str], cwd: Path, home: Path, url: str = "") -> subprocess.Popen[str]:
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-resume", "HOME": str(home), "COLUMNS": "160"}
    if url:
        env["ANTHROPIC_BASE_URL"] = url
    return subprocess.Popen(
        [sys.executable, "-c", "from sleuth.cli import main; main()", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def wait_for_tools(folder: Path, count: int, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in folder.glob("*.jsonl"):
            if path.read_bytes().count(b'"type":"tool_executed"') >= count:
                return path
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the investigation never ran its first tools")


def crash_mid_investigation(project: Path, sshd: Any) -> Path:
    with ScriptedAPI([FIRST, stall(60, REST[0])]) as api:
        proc = sleuth(
            ["ask", "Is there a NextN class?", "--host", "gpu", "--json"],
            project,
            sshd.home,
            api.url,
        )
        path = wait_for_tools(project / "transcripts", 2, proc)
        deadline = time.monotonic() + 30
        while len(api.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the second turn is in flight, stalled
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    return path


def test_a_killed_ask_verifies_as_a_prefix_and_resume_finishes_it(project: Path, sshd: Any) -> None:
    path = crash_mid_investigation(project, sshd)
    code, out, _ = finish(sleuth(["verify", str(path), "--json"], project, sshd.home))
    report = json.loads(out)
    assert code == 3 and report["ok"] and not report["ended"]  # intact, unsigned
    before = len(load(path).events)
    unsigned = path.read_bytes()
    code, _, err = finish(sleuth(["resume", str(path)], project, sshd.home, "http://127.0.0.1:9"))
    assert code == 1 and "no allowed signature vouches" in err and "--trust-unsigned" in err
    assert path.read_bytes() == unsigned, "an unsigned prefix is not continued unasked"

    with ScriptedAPI(REST) as api:
        args = ["resume", str(path), "--json", "--base-url", api.url, "--trust-unsigned"]
        code, out, err = finish(sleuth(args, project, sshd.home))
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "answered" and result["transcript"] == str(path)
    (f,) = result["findings"]
    assert f["grounded"], "a quote of a call made before the crash must still ground"
    sent = api.bodies()[0]["messages"]
    assert len(sent) == 3 and NEXTN in json.dumps(sent[2]), "resume continued, not restarted"

    events = load(path).events
    assert verify(path).ok and verify(path).ended
    resumed = [e for e in events[before:] if isinstance(e, SessionStarted)]
    assert len(resumed) == 1 and resumed[0].resumed_from == str(path)
    end = events[-1]
    assert isinstance(end, SessionEnded) and end.totals.turns == 3 and end.totals.tool_calls == 2
    assert replay(path).ok


def test_resume_refuses_a_finished_or_tampered_transcript(project: Path, sshd: Any) -> None:
    path = crash_mid_investigation(project, sshd)
    lines = path.read_bytes().splitlines(keepends=True)
    tampered = path.with_name("tampered.jsonl")
    tampered.write_bytes(b"".join(lines).replace(b"DeepseekV3", b"DeepseekV4", 1))
    code, _, err = finish(
        sleuth(["resume", str(tampered)], project, sshd.home, "http://127.0.0.1:9")
    )
    assert code == 1 and "fails verification at line" in err and "sleuth verify" in err

    with ScriptedAPI(REST) as api:
        resumed = sleuth(
            ["resume", str(path), "--base-url", api.url, "--trust-unsigned"], project, sshd.home
        )
        assert finish(resumed)[0] == 0
    code, _, err = finish(sleuth(["resume", str(path)], project, sshd.home, "http://127.0.0.1:9"))
    assert code == 1 and "already ended" in err


def _kill_when(path_glob: Path, proc: subprocess.Popen[str], ready: Any) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for path in path_glob.glob("*.jsonl"):
            if ready(path.read_bytes()):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                return path
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the investigation never got where it was to be killed")


def test_resume_twice_after_two_kills_keeps_every_completed_turn(
    project: Path, workspace: Path, sshd: Any
) -> None:
    # Kill 1: mid-turn. One call of turn 1 is recorded; the other blocks in an interpreter
    # that never answers (the host program refuses to read a FIFO, so a pipe cannot block).
    # Outside the roots, so the host vouches for it and it runs (issue 39.1).
    stuck = workspace.parent / "stuck" / "python3"
    stuck.parent.mkdir()
    stuck.write_text("#!/bin/sh\nexec sleep 120\n")
    stuck.chmod(0o755)
    blocked = message(
        tool_use("toolu_cfg", "read_json", host="gpu", path="config.json"),
        tool_use("toolu_stuck", "python_env", host="gpu", python=str(stuck)),
    )
    with ScriptedAPI([blocked]) as api:
        proc = sleuth(
            ["ask", "Is there a NextN class?", "--host", "gpu", "--json"],
            project,
            sshd.home,
            api.url,
        )
        path = _kill_when(
            project / "transcripts",
            proc,
            lambda data: (
                b'"toolu_cfg"' in data.split(b"model_turn")[-1] and b'"tool_executed"' in data
            ),
        )
    assert verify(path).ok

    # Resume 1 redoes turn 1 (new calls), completes it, then stalls in turn 2: kill 2.
    redo = message(
        text("Reading again."),
        tool_use("toolu_cfg2", "read_json", host="gpu", path="config.json"),
        tool_use("toolu_src2", "read_lines", host="gpu", path="src/model.py"),
    )
    with ScriptedAPI([redo, stall(60, message(text("never")))]) as api:
        proc = sleuth(
            ["resume", str(path), "--json", "--base-url", api.url, "--trust-unsigned"],
            project,
            sshd.home,
        )
        _kill_when(
            path.parent, proc, lambda data: b'"toolu_src2"' in data and len(api.requests) >= 2
        )
        first_resume = api.bodies()[0]["messages"]
    assert len(first_resume) == 1, "the half-run turn is left out, to be redone"
    assert verify(path).ok

    # Resume 2 must continue after the redone turn, not lose it.
    final = [
        message(finding("toolu_f", "The source defines a NextN class.", [("toolu_src2", NEXTN)])),
        message(text("Yes.")),
    ]
    with ScriptedAPI(final) as api:
        code, out, err = finish(
            sleuth(
                ["resume", str(path), "--json", "--base-url", api.url, "--trust-unsigned"],
                project,
                sshd.home,
            )
        )
    assert code == 0, err
    sent = api.bodies()[0]["messages"]
    assert len(sent) == 3 and "toolu_src2" in json.dumps(sent) and NEXTN in json.dumps(sent[2])
    (kept,) = json.loads(out)["findings"]
    assert kept["grounded"]
    events = load(path).events
    assert sum(isinstance(e, SessionStarted) for e in events) == 3
    assert verify(path).ok and verify(path).ended
    assert replay(path).ok

    shown = finish(sleuth(["show", str(path), "--format", "md"], project, sshd.home))[1]
    assert "resumed here (segment 2)" in shown and "resumed here (segment 3)" in shown
