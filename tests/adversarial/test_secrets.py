"""Secrets: a corpus of realistic credentials, planted in files, in the environment and in
tool outputs, and not one byte of them in a transcript, a request to the model, or the
terminal.

The scripted model reads every planted file (locally and over sshd), greps for credentials,
then copies what it was shown into its answer, so anything the tools let through would
surface in the requests, the transcript and the printed answer.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.brains.anthropic import AnthropicBrain
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Limits, Settings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.transcripts.redact import clear_registered_secrets
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, message, text, tool_use
from tests.sshd import SSHServer

from . import figures


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def corpus() -> dict[str, str]:
    """name -> the secret value, each freshly random in its real format."""
    pem_body = "\n".join(_rand(64, string.ascii_letters + string.digits + "+/") for _ in range(6))
    return {
        "anthropic": f"sk-ant-api03-{_rand(86, string.ascii_letters + string.digits + '_-')}AA",
        "openai": f"sk-proj-{_rand(48)}",
        "huggingface": f"hf_{_rand(34)}",
        "aws_key_id": f"AKIA{_rand(16, string.ascii_uppercase + string.digits)}",
        "aws_secret": _rand(40, string.ascii_letters + string.digits + "/+"),
        "github": f"ghp_{_rand(36)}",
        "github_pat": f"github_pat_{_rand(22)}_{_rand(59)}",
        "slack": f"xoxb-{_rand(12, string.digits)}-{_rand(13, string.digits)}-{_rand(24)}",
        "pem_rsa": f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
        "pem_openssh": (
            f"-----BEGIN OPENSSH PRIVATE KEY-----\n{_rand(70)}\n{_rand(70)}\n"
            "-----END OPENSSH PRIVATE KEY-----"
        ),
        "url_password": f"Pw{_rand(18)}",
    }


def fingerprints(values: dict[str, str]) -> dict[str, list[str]]:
    """The parts of each secret whose presence anywhere counts as a leak."""
    out: dict[str, list[str]] = {}
    for name, value in values.items():
        if name.startswith("pem"):
            out[name] = [line for line in value.splitlines() if "-----" not in line]
        else:
            out[name] = [value]
    return out


def plant(root: Path, s: dict[str, str]) -> list[str]:
    files = {
        ".env": (
            f"ANTHROPIC_API_KEY={s['anthropic']}\nOPENAI_API_KEY={s['openai']}\n"
            f"HF_TOKEN={s['huggingface']}\n"
        ),
        "deploy.sh": (
            f"export AWS_ACCESS_KEY_ID={s['aws_key_id']}\n"
            f"export AWS_SECRET_ACCESS_KEY={s['aws_secret']}\n"
            f"git clone https://{s['github']}@github.com/org/repo\n"
            f"curl -H 'Authorization: token {s['github_pat']}' https://api.github.com\n"
        ),
        "notify.py": f'SLACK = "{s["slack"]}"\nDB = "postgres://admin:{s["url_password"]}@db:5432/x"\n',
        "id_rsa": s["pem_rsa"] + "\n",
        "key.pem": "before\n" + s["pem_openssh"] + "\nafter\n",
        "server.log": (
            f"INFO starting with token {s['huggingface']}\n"
            f"DEBUG aws_secret_access_key = {s['aws_secret']}\n"
            f"ERROR fetch https://bot:{s['url_password']}@hub.example.com/m failed\n"
        ),
        "config.json": json.dumps(
            {"hf_token": s["huggingface"], "api_key": s["openai"], "slack": s["slack"]}
        ),
    }
    for name, body in files.items():
        (root / name).write_text(body)
    return sorted(files)


def reading_script(files: list[str], hosts: list[str]) -> Any:
    """Read everything on every host, grep for credentials, then repeat what was seen."""
    calls = [
        tool_use(f"toolu_{h}_{i}", "read_lines", host=h, path=f)
        for h in hosts
        for i, f in enumerate(files)
    ]
    calls += [
        tool_use(
            f"toolu_{h}_grep",
            "grep",
            host=h,
            path=".",
            pattern="(key|token|secret|://)",
            ignore_case=True,
        )
        for h in hosts
    ]
    calls += [tool_use(f"toolu_{h}_json", "read_json", host=h, path="config.json") for h in hosts]

    def script(body: Any, index: int) -> Any:
        if index == 0:
            return message(text("Reading the deployment files."), *calls)
        seen = [
            block.get("content")
            for msg in body["messages"]
            if msg["role"] == "user" and isinstance(msg["content"], list)
            for block in msg["content"]
            if block.get("type") == "tool_result"
        ]
        return message(text("Here is everything I was shown:\n" + json.dumps(seen)))

    return script


def leaks(blob: str, prints: dict[str, list[str]]) -> dict[str, int]:
    found = {}
    for name, parts in prints.items():
        n = sum(len(p) for p in parts if p in blob)
        if n:
            found[name] = n
    return found


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, dict[str, str], list[str]]:
    root = tmp_path / "deploy"
    root.mkdir()
    values = corpus()
    return root, values, plant(root, values)


@pytest.mark.ssh
def test_no_secret_reaches_the_transcript_or_the_model(
    planted: tuple[Path, dict[str, str], list[str]], sshd: SSHServer, tmp_path: Path
) -> None:
    from sleuth.hosts.ssh import SSHHost

    root, values, files = planted
    prints = fingerprints(values)
    ssh = SSHHost(
        "remote",
        sshd.alias,
        known_hosts=tmp_path / "kh",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
    )
    config = HostConfig(roots=[str(root)])
    ctx = ToolContext(
        hosts={
            "local": SandboxedHost("local", LocalHost(), config, Limits()),
            "remote": SandboxedHost("remote", ssh, config, Limits()),
        }
    )
    with ScriptedAPI(reading_script(files, ["local", "remote"])) as api:
        brain = AnthropicBrain("claude-haiku-4-5", api_key=values["anthropic"], base_url=api.url)
        inv = start_investigation(
            "Which credentials does it use?", brain, ctx, Settings(), tmp_path / "t"
        )
        result = inv.run()
    ssh.close()
    clear_registered_secrets()
    transcript = Path(result.transcript).read_text()
    requests = json.dumps(api.bodies())
    assert result.status == "unsupported"  # the script reports no finding
    assert "[REDACTED:" in transcript and "[REDACTED:" in requests  # the files were read
    assert verify(Path(result.transcript)).ok
    leaked = {
        **leaks(transcript, prints),
        **leaks(requests, prints),
        **leaks(result.answer, prints),
    }
    figures.count("secrets_leaked_bytes", sum(leaked.values()))
    assert leaked == {}


def _sleuth(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.ssh
def test_no_secret_reaches_the_terminal(
    planted: tuple[Path, dict[str, str], list[str]], sshd: SSHServer, tmp_path: Path
) -> None:
    root, values, files = planted
    prints = fingerprints(values)
    (root / "sleuth.toml").write_text(f'[hosts.remote]\nssh = "{sshd.alias}"\nroots = ["{root}"]\n')
    env = {
        **os.environ,
        "HOME": str(sshd.home),
        "HF_TOKEN": values["huggingface"],
        "OPENAI_API_KEY": values["openai"],
        "AWS_SECRET_ACCESS_KEY": values["aws_secret"],
        "GITHUB_TOKEN": values["github"],
        "SLACK_BOT_TOKEN": values["slack"],
        "DATABASE_URL": f"postgres://admin:{values['url_password']}@db/x",
    }
    env.pop("OPENAI_BASE_URL", None)
    printed = []
    for host in ("local", "remote"):  # grep "." prints every line of every file
        for fmt in ([], ["--json"]):
            run = _sleuth(["tool", "grep", "pattern=.", "path=.", "--host", host, *fmt], root, env)
            assert run.returncode == 0, run.stderr
            assert "[REDACTED:private-key]" in run.stdout
            printed.append(run.stdout + run.stderr)
    with ScriptedAPI(reading_script(files, ["local", "remote"])) as api:
        ask_env = {**env, "ANTHROPIC_API_KEY": values["anthropic"], "ANTHROPIC_BASE_URL": api.url}
        for fmt in ([], ["--json"]):
            api.requests.clear()
            run = _sleuth(
                [
                    "ask",
                    "Which credentials?",
                    "--host",
                    "remote",
                    "--transcripts",
                    str(tmp_path / "t"),
                    *fmt,
                ],
                root,
                ask_env,
            )
            assert run.returncode == 3, run.stderr  # no finding: unsupported
            printed.append(run.stdout + run.stderr)
            printed.append(json.dumps(api.bodies()))
    transcripts = [p.read_text() for p in (tmp_path / "t").glob("*.jsonl")]
    assert len(transcripts) == 2
    everything = "\n".join(printed + transcripts)
    assert "[REDACTED:" in everything
    leaked = leaks(everything, prints)
    figures.count("secrets_leaked_bytes", sum(leaked.values()))
    assert leaked == {}
