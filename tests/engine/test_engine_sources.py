"""Real engine sources as an operator's host has them, investigated over SSH.

The engine venv's vLLM and a `pip install --no-deps sglang` venv are real installed trees.
python_env finds each; the playbook's engine-support family answers from SGLang's installed
files with file:line quotes that are true lines of those files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from sleuth.agent.calls import execute
from tests.engine.conftest import RemoteFactory
from tests.engine.engine_env import SGLANG_VERSION, VLLM_VERSION, EngineEnv, SourceEnv
from tests.sshd import SSHServer


def site_packages(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


def test_python_env_finds_each_installed_engine(
    engine_env: EngineEnv, sglang_src: SourceEnv, remote_context: RemoteFactory
) -> None:
    ctx = remote_context(
        [str(site_packages(engine_env.python)), str(site_packages(sglang_src.python))]
    )
    for python, name, version in (
        (engine_env.python, "vllm", VLLM_VERSION),
        (sglang_src.python, "sglang", SGLANG_VERSION),
    ):
        result = execute(ctx, "python_env", {"host": "gpu", "python": str(python)})
        assert result.ok, result.output
        found = {p["name"]: p for p in result.data["packages"]}
        assert found[name]["installed"], result.output
        assert found[name]["version"] == version
        assert Path(found[name]["path"]).is_relative_to(site_packages(python))
        assert found[name]["inside_roots"]


def sleuth(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "COLUMNS": "200"}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_playbook_answers_engine_support_from_installed_sglang(
    sglang_src: SourceEnv, sshd: SSHServer, tmp_path: Path
) -> None:
    sp = site_packages(sglang_src.python)
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/known_hosts"\n\n'
        f'[hosts.gpu]\nssh = "{sshd.alias}"\nroots = ["{sp}"]\npython = "{sglang_src.python}"\n'
    )
    proc = sleuth(
        [
            "ask",
            "Does sglang support the 'NEXTN' speculative algorithm?",
            "--host",
            "gpu",
            "--json",
        ],
        tmp_path,
        sshd.home,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out["status"] == "answered"
    finding = out["findings"][0]
    assert finding["grounded"], finding
    quotes = [e["quote"] for e in finding["evidence"]]
    located = [re.match(r"(?P<file>[^:]+):(?P<line>\d+):(?P<text>.*)", q) for q in quotes]
    assert located and all(located), quotes
    for m in located:
        assert m is not None
        path = Path(m["file"]) if m["file"].startswith("/") else sp / "sglang" / m["file"]
        assert path.is_relative_to(sp / "sglang"), path
        line = path.read_text().splitlines()[int(m["line"]) - 1]
        assert line.strip() == m["text"].strip()
        assert "nextn" in line.lower()
