"""The capacity family end to end: `sleuth ask` offline answers "will it fit" with grounded
findings, and the README's worked example is what the tool prints for the same checkpoint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.playbook.capacity import capacity_input
from sleuth.agent.playbook.plan import Question
from sleuth.agent.playbook.registry import route
from sleuth.transcripts.verify import verify
from tests import checkpoint_fixtures as fx

QUESTION = "Will Qwen3.5-397B-A17B-NVFP4 fit on 8xH200 with tp 8 and 128k context?"
README = Path(__file__).parent.parent / "README.md"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory holding the full-size Qwen3.5-397B-A17B NVFP4 checkpoint (sparse)."""
    cwd = tmp_path_factory.mktemp("project")
    fx.big_moe(cwd / "models" / "Qwen3.5-397B-A17B-NVFP4")
    return cwd


def ask(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "ask", *args],
        cwd=cwd,
        env={**env, "HOME": str(cwd), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_question_routes_to_capacity_with_its_numbers() -> None:
    q = Question(QUESTION, {"local": ["/work"]})
    assert route(q) == "capacity"
    assert capacity_input(q, "/models/m") == {
        "host": "local",
        "model_dir": "/models/m",
        "gpus": "8xH200",
        "tp": 8,
        "context_length": 131072,
    }


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("Will it fit on 8x MI300X with tp 8?", "8xMI300X"),
        ("Will it fit on an MI325X?", "MI325X"),
        ("Will it fit on a GH200?", "GH200"),
        ("Will it fit on an RTX A5000?", "RTX A5000"),
    ],
)
def test_amd_grace_hopper_and_workstation_gpus_are_read_from_the_question(
    text: str, gpus: str
) -> None:
    assert capacity_input(Question(text, {"local": ["/w"]}), "/m")["gpus"] == gpus


def test_sleuth_ask_offline_answers_with_grounded_findings(project: Path) -> None:
    done = ask(project, QUESTION, "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["brain"] == "playbook" and out["status"] == "answered"
    fit, quant = out["findings"]
    assert fit["verdict"] == "yes" and fit["grounded"] and quant["grounded"]
    assert "on 8× NVIDIA H200 with sglang tp 8 at a 131,072-token context: fits" in fit["claim"]
    assert "15,360 bytes per token per GPU" in fit["claim"]
    quotes = [e["quote"] for e in fit["evidence"]]
    assert quotes[0] == "verdict: fits"
    assert quotes[1].startswith("KV bytes per token per GPU: 15,360 = ")
    assert "fallback (weight-only)" in quant["claim"]
    # Which release's rules were applied, and that none was found: said and quoted (issue 43).
    assert "the newest rules assumed" in fit["claim"]
    assert quotes[-1].startswith("engine version: sglang (version unknown)")
    assert verify(project / out["transcript"]).ok


def test_readme_worked_example_is_what_the_tool_prints(project: Path) -> None:
    section = README.read_text().split("## Will it fit?", 1)[1].split("\n## ", 1)[0]
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert shown is not None
    done = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "tool", "capacity_plan",
         "model_dir=models/Qwen3.5-397B-A17B-NVFP4", "gpus=8xH200", "tp=8",
         "context_length=131072", "--json"],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HOME": str(project)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)["output"]
    for line in shown.group(1).splitlines():
        if line.strip() and not line.startswith(("$", "...")):
            assert line.replace("MODELS", str(project / "models")) in output, line
