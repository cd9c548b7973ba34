"""Environment is code: a launch's `env` that names a loader, interpreter or shell start-up
variable is refused under `sleuth ask --yes` and `sleuth tool --yes`, even with the preset
approved by a rule and `env = ["*"]`; only a rule that names the variable exactly lets it
through. One injection per family, each with a payload that would leave a canary file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.store import load
from tests.scripted_api import ScriptedAPI, message, text, tool_use

from . import figures
from .test_consent import SLEUTH, only_transcript, sleuth_env

CANARY = "ENV_CANARY"
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}


def families(evil: Path, canary: Path) -> dict[str, dict[str, str]]:
    """An `env` per family of start-up variable; {evil} holds the payload files."""
    touch = f"touch {canary}"
    return {
        "loader preload": {"LD_PRELOAD": f"{evil}/evil.so"},
        "loader audit": {"LD_AUDIT": f"{evil}/evil.so"},
        "libc tunables": {"GLIBC_TUNABLES": "glibc.malloc.mxfast=0"},
        "charset modules": {"GCONV_PATH": str(evil)},
        "python path": {"PYTHONPATH": str(evil)},
        "python start-up": {"PYTHONSTARTUP": f"{evil}/sitecustomize.py"},
        "python warnings and browser": {
            "PYTHONWARNINGS": "all:0:antigravity.x:0:0",
            "BROWSER": f"sh -c '{touch}' %s",
        },
        "bash start-up": {"BASH_ENV": f"{evil}/rc.sh"},
        "sh start-up": {"ENV": f"{evil}/rc.sh"},
        "shell tracing": {"SHELLOPTS": "xtrace", "PS4": f"$({touch})"},
        "perl": {"PERL5OPT": "-d", "PERL5DB": f"system('{touch}')"},
        "ruby": {"RUBYOPT": f"-r{evil}/x.rb"},
        "node": {"NODE_OPTIONS": f"--require {evil}/x.js"},
        "java": {"JAVA_TOOL_OPTIONS": f"-javaagent:{evil}/x.jar"},
        "program search path": {"PATH": f"{evil}:/usr/bin:/bin"},
        "home": {"HOME": str(evil)},
        "xdg": {"XDG_CONFIG_HOME": str(evil)},
        "git": {"GIT_SSH_COMMAND": touch},
        "pager and editor": {"PAGER": touch, "EDITOR": touch},
        "compiler": {"CC": f"{evil}/cc"},
        "cuda injection": {"CUDA_INJECTION64_PATH": f"{evil}/evil.so"},
        "nccl plugin": {"NCCL_NET_PLUGIN": f"{evil}/evil.so"},
        "openssl": {"OPENSSL_CONF": f"{evil}/openssl.cnf"},
    }


def plant(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A project whose host approves the sglang preset and any ordinary env name by rule,
    and a folder of payloads that would leave the canary if any variable were honoured."""
    root, evil, canary = tmp_path / "deploy", tmp_path / "evil", tmp_path / CANARY
    (root / "models").mkdir(parents=True)
    evil.mkdir()
    code = f"open({str(canary)!r}, 'a').write('ran\\n')\n"
    (evil / "sitecustomize.py").write_text(code)
    (evil / "rc.sh").write_text(f"echo ran >> {canary}\n")
    fake = evil / "python3"
    fake.write_text(f"#!/bin/sh\necho ran >> {canary}\n")
    fake.chmod(0o755)
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{root}"]\nallow = ["launch_server"]\n\n'
        '[hosts.local.approve]\nengines = ["sglang"]\nenv = ["*"]\n'
    )
    return root, evil, canary


def launch(env: dict[str, str]) -> dict[str, Any]:
    # No preflight: it would refuse the stand-in engine before the server (and its env) ran.
    return {
        "engine": "sglang",
        "model_path": "models",
        "env": env,
        "timeout_s": 5,
        "poll_s": 0.1,
        "preflight": False,
    }


def test_sleuth_ask_yes_runs_no_start_up_variable(tmp_path: Path) -> None:
    _, evil, canary = plant(tmp_path)
    cases = families(evil, canary)
    calls = [
        tool_use(f"toolu_{i}", "launch_server", **launch(env))
        for i, env in enumerate(cases.values())
    ]
    script = [message(text("Starting the servers."), *calls), message(text("Done."))]
    with ScriptedAPI(script) as api:
        done = subprocess.run(
            [*SLEUTH, "ask", "Start the servers.", "--yes", "--json"],
            cwd=tmp_path,
            env=sleuth_env(api),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode in (0, 3), done.stderr
    events = load(only_transcript(tmp_path / "transcripts")).events
    approvals = {e.call_id: e for e in events if isinstance(e, ApprovalEvent)}
    executed = {e.call_id: e for e in events if isinstance(e, ToolExecuted)}

    figures.count("env_injection_variants", len(cases))
    figures.count("env_injection_runs", int(canary.exists()))
    assert not canary.exists()
    for i, env in enumerate(cases.values()):
        approval = approvals[f"toolu_{i}"]
        assert not approval.approved and approval.rule == "hosts.local.approve.env"
        assert approval.env == sorted(env)
        # The approval shows the names, never the values.
        assert all(v not in json.dumps(approval.input) for v in env.values())
        result = executed[f"toolu_{i}"].result
        assert result.refused and "no --yes, prompt or glob approves them" in result.output


def sleuth_tool(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    pairs = [f"{k}={json.dumps(v) if isinstance(v, dict) else v}" for k, v in launch(env).items()]
    return subprocess.run(
        [*SLEUTH, "tool", "launch_server", *pairs, "--yes", "--json"],
        cwd=tmp_path,
        env={**PLAIN_ENV, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("family", list(families(Path("/e"), Path("/c"))))
def test_sleuth_tool_yes_runs_no_start_up_variable(tmp_path: Path, family: str) -> None:
    _, evil, canary = plant(tmp_path)
    env = families(evil, canary)[family]
    done = sleuth_tool(tmp_path, env)
    figures.count("env_injection_variants")
    figures.count("env_injection_runs", int(canary.exists()))
    assert not canary.exists()
    assert done.returncode == 3, done.stdout + done.stderr
    shown = json.loads(done.stdout)
    assert shown["error_kind"] == "not_approved"
    assert f"env = {json.dumps(sorted({'*', *env}))}" in shown["error"]


@pytest.mark.parametrize("name", ["PYTHONPATH", "PATH"])
def test_a_start_up_variable_a_rule_names_exactly_does_reach_the_server(
    tmp_path: Path, name: str
) -> None:
    """The control: the payloads above are live; the refusal is what kept them out."""
    _, evil, canary = plant(tmp_path)
    toml = tmp_path / "sleuth.toml"
    toml.write_text(toml.read_text().replace('env = ["*"]', f'env = ["*", "{name}"]'))
    env = families(evil, canary)["python path" if name == "PYTHONPATH" else "program search path"]
    done = sleuth_tool(tmp_path, env)
    shown = json.loads(done.stdout)
    assert shown["error_kind"] != "not_approved", shown
    assert canary.exists()
