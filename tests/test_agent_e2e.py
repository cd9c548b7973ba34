"""End to end: a scripted model investigates a "remote" host over the test sshd, and
`sleuth ask` runs as a subprocess against the scripted Messages-API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.session import start_investigation
from sleuth.config import Settings
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import SessionStarted, ToolExecuted
from sleuth.transcripts.store import load
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use
from tests.test_agent_anthropic import workspace

__all__ = ["workspace"]
pytestmark = pytest.mark.ssh

QUESTION = "Does the checkpoint declare MTP heads, and does the source define a NextN class?"


def investigate_remote(host: str) -> list[Any]:
    return [
        message(
            text("Reading the config and the model source on the host."),
            tool_use(
                "toolu_cfg",
                "read_json",
                host=host,
                path="config.json",
                pointer="/num_nextn_predict_layers",
            ),
            tool_use("toolu_src", "read_lines", host=host, path="src/model.py"),
        ),
        message(
            finding(
                "toolu_f1",
                "The config declares one MTP layer and the source defines a NextN model class.",
                [
                    ("toolu_cfg", "num_nextn_predict_layers:\n1"),
                    ("toolu_src", "class DeepseekV3ForCausalLMNextN(torch.nn.Module):"),
                ],
            )
        ),
        message(text("Yes: one MTP layer is declared and DeepseekV3ForCausalLMNextN exists.")),
    ]


def test_a_scripted_model_reads_a_remote_host_and_reports_a_grounded_finding(
    workspace: Path, make_context: Callable[..., ToolContext], sshd: Any, tmp_path: Path
) -> None:
    ctx = make_context([str(workspace)])
    with ScriptedAPI(investigate_remote("remote")) as api:
        brain = AnthropicBrain("claude-haiku-4-5", api_key="test-key-e2e", base_url=api.url)
        result = start_investigation(QUESTION, brain, ctx, Settings(), tmp_path / "t").run()
    assert result.status == "answered"
    (f,) = result.findings
    assert f.grounded and all(e.grounded for e in f.evidence)
    events = load(Path(result.transcript)).events
    started = events[0]
    assert isinstance(started, SessionStarted)
    remote = next(h for h in started.hosts if h.name == "remote")
    assert remote.fingerprint == sshd.host_key_fingerprint
    assert {"sleuth", "anthropic", "paramiko", "pydantic"} <= set(started.versions)
    executed = {e.call_id: e for e in events if isinstance(e, ToolExecuted)}
    assert executed["toolu_src"].host == "remote"
    # read_lines ran as the host program's request, on the resolved path, in either call mode.
    (argv,) = executed["toolu_src"].result.argv
    assert argv[:2] == ["sleuth-program", "read_lines"]
    assert argv[2] == str(workspace / "src" / "model.py")
    tool_result = api.bodies()[1]["messages"][-1]["content"][1]
    assert "class DeepseekV3ForCausalLMNextN" in tool_result["content"]


def sleuth_ask(
    args: list[str], cwd: Path, home: Path, url: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": url,
        "HOME": str(home),
        "COLUMNS": "160",
    }
    code = "from sleuth.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "ask", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path, workspace: Path, sshd: Any) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "sleuth.toml").write_text(
        f'[hosts.gpu]\nssh = "{sshd.alias}"\nroots = ["{workspace}"]\n'
    )
    return cwd


def test_sleuth_ask_answers_prints_findings_and_writes_the_transcript(
    project: Path, sshd: Any
) -> None:
    with ScriptedAPI(investigate_remote("gpu")) as api:
        done = sleuth_ask([QUESTION, "--host", "gpu"], project, sshd.home, api.url)
    assert done.returncode == 0, done.stderr
    assert "Findings" in done.stdout and "DeepseekV3ForCausalLMNextN" in done.stdout
    assert "ungrounded" not in done.stdout
    (transcript,) = (project / "transcripts").glob("*.jsonl")
    events = load(transcript).events
    assert events[-1].type == "session_ended" and events[-1].status == "answered"  # type: ignore[union-attr]


def test_sleuth_ask_json_is_parseable_and_a_spent_budget_exits_3(project: Path, sshd: Any) -> None:
    def forever(body: Any, index: int) -> Any:
        return message(tool_use(f"toolu_{index}", "list_dir", host="gpu", path="."))

    with ScriptedAPI(forever) as api:
        done = sleuth_ask(
            [QUESTION, "--host", "gpu", "--max-turns", "2", "--json", "--transcripts", "out"],
            project,
            sshd.home,
            api.url,
        )
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    # No grounded finding: unsupported, exit 3, with the spent budget named.
    assert report["status"] == "unsupported" and report["brain"] == "anthropic"
    assert "max_turns (2)" in report["answer"]
    assert report["totals"]["turns"] == 3
    assert (project / report["transcript"]).parent == project / "out"


def test_sleuth_ask_with_base_url_but_no_model_is_a_usage_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sleuth.cli import main; main()",
            "ask",
            "q",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--model is required" in done.stderr
