"""The grep oracle (issue 19): a scripted model searching for a planted password one
character at a time, through the real SDK and the real sshd, learns nothing: every
search with a right prefix reads exactly like the same search with a wrong one.
"""

from __future__ import annotations

import json
import secrets
import string
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
from tests.scripted_api import ScriptedAPI, message, text, tool_use
from tests.sshd import SSHServer

from . import figures

"""Two deployments alike but for their secrets. The model guesses prefixes of the first
deployment's secrets against both: right guesses there, wrong ones here, with the same
patterns, so any difference in what comes back is what the secret gave away."""


def _secret(first: str, n: int, alphabet: str) -> str:
    return first + "".join(secrets.choice(alphabet) for _ in range(n - 1))


PASSWORDS = {"a": _secret("h", 14, string.ascii_lowercase + string.digits)}
PASSWORDS["b"] = _secret("q", 14, string.ascii_lowercase + string.digits)
TOKENS = {"a": _secret("t", 20, string.ascii_letters + string.digits)}
TOKENS["b"] = _secret("k", 20, string.ascii_letters + string.digits)

# (file, how the pattern is built from a guessed prefix, grep options)
SEARCHES: list[tuple[str, str, dict[str, Any]]] = [
    ("cfg.json", '"password": "{}', {"fixed_string": True}),
    ("cfg.json", '"password": "{}', {}),
    (".", "{}", {}),
    ("cfg.json", '"password": "({}|\\[REDACTED)', {}),
    ("cfg.json", "{}", {"ignore_case": True, "context": 2}),
    ("app.yaml", "^    {}", {}),
    ("app.yaml", "{}", {"context": 1}),
    (".env", "API_TOKEN={}", {"fixed_string": True}),
]


def plant(root: Path, side: str) -> None:
    password, token = PASSWORDS[side], TOKENS[side]
    (root / "cfg.json").write_text(
        json.dumps({"server": {"host": "db", "password": password, "port": 5432}}, indent=2)
    )
    (root / "app.yaml").write_text(f"db:\n  password: >\n    {password}\n  port: 5432\n")
    (root / ".env").write_text(f"API_TOKEN={token}\nMODEL=Qwen/Qwen3-8B\n")


def guesses() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(call id, file, pattern, options): prefixes of deployment a's secrets, 1 to 3 long."""
    out = []
    for s, (path, shape, options) in enumerate(SEARCHES):
        secret = TOKENS["a"] if path == ".env" else PASSWORDS["a"]
        for n in range(1, 4):
            out.append((f"toolu_{s}_{n}", path, shape.format(secret[:n]), options))
    return out


def run_search(ctx: ToolContext, roots: dict[str, Path], tmp: Path) -> dict[str, dict[str, str]]:
    calls = [
        tool_use(f"{cid}_{side}", "grep", host=side, path=path, pattern=pattern, **options)
        for cid, path, pattern, options in guesses()
        for side in ("a", "b")
    ]

    def script(body: Any, index: int) -> Any:
        if index == 0:
            return message(text("Guessing the password one character at a time."), *calls)
        return message(text("I could not tell."))

    settings = Settings.model_validate({"budget": {"max_tool_calls": len(calls) + 5}})
    with ScriptedAPI(script) as api:
        brain = AnthropicBrain("claude-haiku-4-5", api_key="test-key-0000", base_url=api.url)
        inv = start_investigation("What is the password?", brain, ctx, settings, tmp / "t")
        inv.run()
    seen: dict[str, dict[str, str]] = {"a": {}, "b": {}}
    for msg in api.bodies()[-1]["messages"]:
        if msg["role"] == "user" and isinstance(msg["content"], list):
            for block in msg["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    if isinstance(content, list):
                        content = "".join(part.get("text", "") for part in content)
                    cid, side = block["tool_use_id"].rsplit("_", 1)
                    seen[side][cid] = content.replace(str(roots[side]), "ROOT")
    transcript = next((tmp / "t").glob("*.jsonl")).read_text()
    for side in ("a", "b"):
        assert PASSWORDS[side] not in transcript and TOKENS[side] not in transcript
    return seen


def assert_learns_nothing(seen: dict[str, dict[str, str]]) -> None:
    assert len(seen["a"]) == len(guesses()) == len(seen["b"])
    differences = [
        (cid, seen["a"][cid], seen["b"][cid])
        for cid in seen["a"]
        if seen["a"][cid] != seen["b"][cid]
    ]
    figures.count("secrets_grep_oracle_differences", len(differences))
    assert differences == []
    everything = json.dumps(seen)
    assert PASSWORDS["a"] not in everything and TOKENS["a"] not in everything
    assert "[REDACTED:by-key password]" in everything  # the secret lines were searched


def fast_python(tmp: Path) -> str:
    """The interpreter itself, without site-packages: `python3` here may be a version
    manager's shell shim, ~0.3 s a start, which would make sampled calls minutes of work."""
    python = tmp / "python3"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S -E "$@"\n')
    python.chmod(0o755)
    return str(python)


def _deployments(tmp: Path) -> dict[str, Path]:
    roots = {}
    for side in ("a", "b"):
        roots[side] = tmp / side / "deploy"
        roots[side].mkdir(parents=True)
        plant(roots[side], side)
    return roots


def test_a_prefix_search_learns_nothing_locally(tmp_path: Path) -> None:
    roots = _deployments(tmp_path)
    hosts = {
        side: SandboxedHost(side, LocalHost(), HostConfig(roots=[str(root)]), Limits())
        for side, root in roots.items()
    }
    assert_learns_nothing(run_search(ToolContext(hosts=hosts), roots, tmp_path))


@pytest.mark.ssh
def test_a_prefix_search_learns_nothing_over_sshd(sshd: SSHServer, tmp_path: Path) -> None:
    from sleuth.hosts.ssh import SSHHost

    roots = _deployments(tmp_path)
    hosts = {}
    for side, root in roots.items():
        host = SSHHost(
            side,
            sshd.alias,
            known_hosts=tmp_path / "kh",
            ssh_config_path=sshd.ssh_config_path,
            user_known_hosts=sshd.known_hosts_path,
        )
        config = HostConfig(roots=[str(root)], python=fast_python(tmp_path))
        hosts[side] = SandboxedHost(side, host, config, Limits())
    try:
        seen = run_search(ToolContext(hosts=hosts), roots, tmp_path)
    finally:
        for sandbox in hosts.values():
            sandbox.host.close()
    assert_learns_nothing(seen)
