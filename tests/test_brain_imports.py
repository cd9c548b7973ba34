"""The brains import a model SDK only when a brain of that provider is made: a run with the
offline playbook (or a command with no brain at all) never pays the seconds it takes."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import sys
from sleuth.agent.brains.select import select_brain
from sleuth.config import Settings

brain = select_brain(Settings(), env={})
print(brain.name, "anthropic" in sys.modules)
from sleuth.agent.brains.anthropic import AnthropicBrain

AnthropicBrain(api_key="sk-ant-test-not-a-key")
print("anthropic" in sys.modules)
"""


def test_the_anthropic_sdk_is_imported_only_for_an_anthropic_brain() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["playbook", "False", "True"]
