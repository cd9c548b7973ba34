"""`sleuth ask` with a scripted model (the real Anthropic SDK against the scripted Messages
API) launches the real engine over SSH, reports a grounded finding from its start-up log, and
ends with the server still running: the run lists it with the command that stops it, `sleuth
servers` lists it alive, and that very command stops it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.engine.conftest import free_port
from tests.engine.engine_env import EngineEnv
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use
from tests.sshd import SSHServer

QUESTION = "Serve the tiny model with vLLM on gpu and tell me how many tokens its KV cache holds."
# 1 GiB (VLLM_CPU_KVCACHE_SPACE=1) / (2 layers x K and V x 2 KV heads x 32 dims x 2 bytes).
KV_LINE = "CPU KV cache size: 2,097,152 tokens"


def sleuth(
    args: list[str], cwd: Path, home: Path, url: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "COLUMNS": "250"}
    env.pop("OPENAI_API_KEY", None)
    if url:
        env |= {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_ask_launches_reports_and_lists_the_server_it_left_running(
    engine_env: EngineEnv, sshd: SSHServer, tmp_path: Path
) -> None:
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/known_hosts"\n\n[hosts.gpu]\nssh = "{sshd.alias}"\n'
        f'roots = ["{engine_env.root}"]\nallow = ["launch_server", "stop_server"]\n'
        # The host's own python is the engine's: a python the model picked would make the
        # preset a custom command, which --yes never approves without a commands rule.
        f'python = "{engine_env.python}"\n'
        # --yes approves the engine's preset and the environment the model passes only where a
        # rule names them, so the test names both as an operator would.
        '[hosts.gpu.approve]\nengines = ["vllm"]\n'
        f"env = {json.dumps(sorted(engine_env.server_env()))}\n"
    )
    port = free_port()
    turns = [
        message(
            text("Launching vLLM on gpu."),
            tool_use(
                "toolu_launch",
                "launch_server",
                host="gpu",
                engine="vllm",
                model_path=str(engine_env.model),
                port=port,
                env=engine_env.server_env(),
                extra_args=["--enforce-eager"],
                timeout_s=900,
                poll_s=1.0,
            ),
        ),
        message(
            finding("toolu_f", "The KV cache holds 2,097,152 tokens.", [("toolu_launch", KV_LINE)])
        ),
        message(text("Its KV cache holds 2,097,152 tokens; the server is still running.")),
    ]
    with ScriptedAPI(turns) as api:
        asked = sleuth(
            ["ask", QUESTION, "--host", "gpu", "--yes", "--json"], tmp_path, sshd.home, api.url
        )
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert out["status"] == "answered"
    assert out["findings"][0]["grounded"], out["findings"]
    # The run ended with its server alive: it says so, with the command that stops it.
    assert "still running" in asked.stderr
    stop_line = next(line for line in asked.stderr.splitlines() if "stop it with:" in line)
    stop_cmd = shlex.split(stop_line.split("stop it with:", 1)[1])
    assert stop_cmd[:3] == ["sleuth", "tool", "stop_server"]

    listed = sleuth(["servers", "--host", "gpu", "--json"], tmp_path, sshd.home)
    assert listed.returncode == 0, listed.stderr
    servers = {s["server_id"]: s for s in json.loads(listed.stdout)["servers"]}
    server_id = stop_cmd[3].removeprefix("server_id=")
    assert servers[server_id]["alive"] and servers[server_id]["port"] == port

    stopped = sleuth([*stop_cmd[1:], "--json"], tmp_path, sshd.home)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert json.loads(stopped.stdout)["data"]["gone"]
    after = sleuth(["servers", "--host", "gpu", "--json"], tmp_path, sshd.home)
    gone = {s["server_id"]: s for s in json.loads(after.stdout)["servers"]}[server_id]
    assert not gone["alive"] and gone["stopped"]
