"""Exit codes as the README says, per command, as a user runs them: 0 ok, 1 error, 2 usage,
3 budget exhausted or refused. Also `--version` and an example in every command's --help.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from sleuth.cli import COMMANDS
from tests.scripted_api import ScriptedAPI, message, text, tool_use

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "transcripts" / "mtp-heads.jsonl"


def sleuth(
    args: list[str], cwd: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env={**env, **(extra_env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("max_model_len = 4096\n")
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{tmp_path}"]\nallow = ["launch_server"]\n'
    )
    return tmp_path


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    proc = sleuth(["--version"], tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == f"sleuth {metadata.version('sleuth')}\n"


def test_every_command_has_an_example_in_its_help(tmp_path: Path) -> None:
    names = list(COMMANDS)
    assert len(names) >= 10
    missing = []
    for name in names:
        proc = sleuth([str(name), "--help"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        if not re.search(rf"Example: sleuth {name}\b", proc.stdout):
            missing.append(name)
    assert missing == []
    assert "Example: sleuth" in sleuth(["--help"], tmp_path).stdout


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["read_lines", "path=notes.txt"], 0, "max_model_len = 4096"),
        (["read_lines", "path=missing.txt"], 1, "no such file"),
        (["no_such_tool", "path=x"], 2, "unknown tool 'no_such_tool'; available:"),
        (["read_lines"], 2, "invalid input for read_lines: path: Field required"),
        (["read_lines", "notes.txt"], 2, "is not key=value"),
        (["read_lines", "path=notes.txt", "--bogus"], 2, "No such option"),
        (["read_lines", "path=/etc/passwd"], 3, "outside the roots"),
        (["stop_server", "server_id=srv-20260101-000000-abcdef"], 3, "not allowed"),
        (
            ["launch_server", "engine=command", 'command=["true"]', "ready_log_line=x"],
            3,
            "`sleuth tool launch_server ... --yes`",
        ),
    ],
    ids=["ok", "error", "unknown-tool", "missing-input", "not-key-value", "bad-option",
         "outside-roots", "not-allowed", "not-approved"],
)  # fmt: skip
def test_tool_exit_codes(project: Path, args: list[str], code: int, says: str) -> None:
    proc = sleuth(["tool", *args], project)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert says in proc.stdout + proc.stderr


def test_a_person_typing_yes_consents_to_that_one_custom_command(project: Path) -> None:
    canary = project / "RAN"
    args = ["launch_server", "engine=command", f'command=["touch", "{canary}"]']
    proc = sleuth(["tool", *args, "ready_log_line=never", "poll_s=0.1", "--yes", "--json"], project)
    # The launch itself fails (touch never becomes ready), but it ran: the person approved it.
    assert canary.exists() and proc.returncode == 1, proc.stderr


def scripted_ask(project: Path, script: list[Any], *args: str) -> subprocess.CompletedProcess[str]:
    with ScriptedAPI(script) as api:
        env = {
            "ANTHROPIC_API_KEY": "sk-ant-test-0123456789abcdefghij",
            "ANTHROPIC_BASE_URL": api.url,
        }
        return sleuth(["ask", "What is in notes.txt?", *args], project, env)


def test_ask_exit_codes(project: Path) -> None:
    read = message(tool_use("toolu_1", "read_lines", path="notes.txt"))
    finding = message(
        tool_use(
            "toolu_2",
            "report_finding",
            claim="notes.txt sets the context length to 4096",
            verdict="yes",
            confidence=0.9,
            evidence=[{"call_id": "toolu_1", "quote": "max_model_len = 4096"}],
        )
    )
    answered = scripted_ask(project, [read, finding, message(text("Done."))])
    assert answered.returncode == 0, answered.stderr
    assert "answered by anthropic: 3 turns, 1 tool call" in answered.stdout
    bare = scripted_ask(project, [message(text("Nothing to see."))])
    assert bare.returncode == 3, bare.stderr  # an answer without evidence is not an answer
    assert "unsupported" in bare.stdout
    spent = scripted_ask(project, [read, message(text("out of turns"))], "--max-turns", "1")
    assert spent.returncode == 3, spent.stderr
    usage = sleuth(["ask", "q", "--base-url", "http://127.0.0.1:9/v1"], project)
    assert usage.returncode == 2 and "--model is required" in usage.stderr


def test_transcript_command_exit_codes(project: Path) -> None:
    lines = REFERENCE.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"seq":2', '"seq":7')  # an edited event breaks the chain
    (project / "edited.jsonl").write_text("".join(lines))
    cases = [
        (["show", str(REFERENCE)], 0),
        (["show", "missing.jsonl"], 1),
        (["show", str(REFERENCE), "--format", "pdf"], 2),
        (["verify", str(REFERENCE)], 3),  # intact but unsigned: integrity only
        (["verify", "edited.jsonl"], 1),
        (["verify"], 2),
        (["replay", str(REFERENCE)], 0),
        (["replay", "missing.jsonl"], 1),
        (["resume", "missing.jsonl"], 1),
    ]
    got = [(args, sleuth(args, project).returncode) for args, _ in cases]
    assert got == cases


def test_other_commands_exit_codes(project: Path) -> None:
    assert sleuth(["tools"], project).returncode == 0
    assert sleuth(["hosts"], project).returncode == 0
    assert sleuth(["bench", "http://127.0.0.1:9"], project).returncode == 2  # no --model
    (project / "sleuth.toml").write_text('[hosts.gpu1]\nroots = "/models"\n')
    broken = sleuth(["hosts"], project)
    assert broken.returncode == 2 and "sleuth.toml:2" in broken.stderr
    demo = sleuth(["demo", "--dir", str(project)], project)  # not empty, and not a demo's
    assert demo.returncode == 2 and "not a demo's" in demo.stderr
