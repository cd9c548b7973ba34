"""Environment is code: a launch's `env` that names a loader, interpreter or shell start-up
variable, or one of the engines' own code-loading variables (a logging config whose "()"
factory calls anything, Triton's tool paths, code caches, the CUDA toolkit, proxies and CA
bundles that would carry the server's HF_TOKEN elsewhere), is refused under `sleuth ask
--yes`, `sleuth tool --yes` and an MCP user's yes, even with the preset approved by a rule
and `env = ["*"]` or the README's `SGLANG_*`; only a rule that names the variable exactly lets
it through. One injection per family, each with a payload that would leave a canary file.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.mcp_support import Answering, McpProject, text_of
from tests.scripted_api import message, text, tool_use

from . import figures
from .test_consent import SLEUTH, ask_yes

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
        **engine_families(evil),
    }


def engine_families(evil: Path) -> dict[str, dict[str, str]]:
    """The engines' own code-loading variables, each pointing into a model-like folder."""
    return {
        "sglang logging config": {"SGLANG_LOGGING_CONFIG_PATH": f"{evil}/logging.json"},
        "vllm logging config": {"VLLM_LOGGING_CONFIG_PATH": f"{evil}/logging.json"},
        "triton tools": {
            "TRITON_PTXAS_PATH": f"{evil}/ptxas",
            "TRITON_PTXAS_BLACKWELL_PATH": f"{evil}/ptxas",
            "TRITON_CUOBJDUMP_PATH": f"{evil}/ptxas",
            "TRITON_NVDISASM_PATH": f"{evil}/ptxas",
        },
        "triton libraries": {
            "TRITON_LIBCUDA_PATH": str(evil),
            "TRITON_LIBDEVICE_PATH": f"{evil}/evil.so",
            "TRITON_CUDART_PATH": str(evil),
        },
        "triton cache classes": {
            "TRITON_CACHE_MANAGER": "evil:Manager",
            "TRITON_REMOTE_CACHE_BACKEND": "evil:Backend",
        },
        "code caches": {
            "TRITON_CACHE_DIR": str(evil),
            "TRITON_HOME": str(evil),
            "TORCHINDUCTOR_CACHE_DIR": str(evil),
            "VLLM_CACHE_ROOT": str(evil),
            "TORCH_EXTENSIONS_DIR": str(evil),
            "HF_MODULES_CACHE": str(evil),
            "CUDA_CACHE_PATH": str(evil),
            "FLASHINFER_WORKSPACE_BASE": str(evil),
        },
        "cuda toolkit": {"CUDA_HOME": str(evil), "CUDA_PATH": str(evil)},
        "proxies": {
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "ALL_PROXY": "socks5://127.0.0.1:9",
        },
        "ca bundles": {
            "REQUESTS_CA_BUNDLE": f"{evil}/ca.pem",
            "SSL_CERT_FILE": f"{evil}/ca.pem",
            "CURL_CA_BUNDLE": f"{evil}/ca.pem",
        },
        "hub address": {"HF_ENDPOINT": "http://127.0.0.1:9"},
    }


def logging_payload(canary: Path) -> str:
    """A logging config as SGLang and vLLM hand it to logging.config.dictConfig: its "()"
    factory is any callable."""
    factory = {"()": "os.system", "command": f"touch {canary}"}
    return json.dumps({"version": 1, "formatters": {"x": factory}})


def plant(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A project whose host approves the sglang preset and any ordinary env name by rule,
    and a folder of payloads that would leave the canary if any variable were honoured."""
    root, evil, canary = tmp_path / "deploy", tmp_path / "evil", tmp_path / CANARY
    (root / "models").mkdir(parents=True)
    evil.mkdir()
    code = f"open({str(canary)!r}, 'a').write('ran\\n')\n"
    (evil / "sitecustomize.py").write_text(code)
    (evil / "rc.sh").write_text(f"echo ran >> {canary}\n")
    (evil / "logging.json").write_text(logging_payload(canary))
    for name in ("python3", "ptxas"):
        fake = evil / name
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
    approvals, executed = ask_yes(tmp_path, "Start the servers.", script)

    figures.count("env_injection_variants", len(cases))
    figures.count("env_injection_runs", int(canary.exists()))
    assert not canary.exists()
    for i, env in enumerate(cases.values()):
        approval = approvals[f"toolu_{i}"]
        assert not approval.approved and approval.rule == "hosts.local.approve.env"
        assert approval.env == sorted(env)
        # The approval shows names and values (none is secret), so a person can judge a
        # path into a model folder.
        assert approval.input["env"] == env
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


READS_LOGGING_CONFIG = (
    "import json,logging.config,os;"
    "logging.config.dictConfig(json.load(open(os.environ['SGLANG_LOGGING_CONFIG_PATH'])))"
)
"""What SGLang and vLLM do with their logging-config variable, as a custom command."""


def logging_launch(evil: Path) -> dict[str, Any]:
    return {
        "engine": "command",
        "command": ["python3", "-c", READS_LOGGING_CONFIG],
        "ready_log_line": "never printed",
        "env": {"SGLANG_LOGGING_CONFIG_PATH": f"{evil}/logging.json"},
        "timeout_s": 5,
        "poll_s": 0.1,
    }


@pytest.mark.parametrize(
    ("env_rule", "runs"), [('["SGLANG_*"]', False), ('["SGLANG_LOGGING_CONFIG_PATH"]', True)]
)
def test_the_readme_glob_does_not_approve_a_logging_config_a_named_rule_does(
    tmp_path: Path, env_rule: str, runs: bool
) -> None:
    """The README's own `SGLANG_*` used to approve SGLANG_LOGGING_CONFIG_PATH, whose "()"
    factory runs any callable; the exact name is the live control."""
    _, evil, canary = plant(tmp_path)
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{tmp_path / "deploy"}"]\nallow = ["launch_server"]\n\n'
        f'[hosts.local.approve]\ncommands = [["python3", "-c"]]\nenv = {env_rule}\n'
    )
    pairs = [
        f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}"
        for k, v in logging_launch(evil).items()
    ]
    done = subprocess.run(
        [*SLEUTH, "tool", "launch_server", *pairs, "--json"],
        cwd=tmp_path,
        env={**PLAIN_ENV, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = json.loads(done.stdout)
    if not runs:
        figures.count("env_injection_variants")
        figures.count("env_injection_runs", int(canary.exists()))
    assert canary.exists() == runs, shown
    assert (shown["error_kind"] == "not_approved") != runs, shown


def test_an_mcp_user_cannot_approve_an_engine_variable_and_sees_values_it_judges(
    tmp_path: Path,
) -> None:
    """Over MCP, a user who accepts every form is not asked about SGLANG_LOGGING_CONFIG_PATH
    under `SGLANG_*` (nobody approves it); a form for ordinary names shows their values, the
    secret one hidden."""
    project = McpProject.create(tmp_path, allow=["launch_server"])
    evil = tmp_path / "evil"
    evil.mkdir()
    canary = tmp_path / CANARY
    (evil / "logging.json").write_text(logging_payload(canary))
    toml = project.root / "sleuth.toml"
    toml.write_text(
        toml.read_text()
        + '\n[hosts.local.approve]\ncommands = [["python3", "-c"]]\nenv = ["SGLANG_*"]\n'
    )
    accepting = Answering("accept")
    token = "hf_" + "Q7vK2mZp9LxR4tWn8YcJ3bHs6DfG1aEu5N"
    judged = {
        **logging_launch(evil),
        "env": {"CUDA_VISIBLE_DEVICES": "0,1", "HF_HOME": f"{evil}/hf", "HF_TOKEN": token},
    }
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client("stdio", elicit=accepting) as client:
            results.append(await client.call_tool("launch_server", logging_launch(evil)))
            results.append(await client.call_tool("launch_server", judged))

    anyio.run(session)
    figures.count("env_injection_variants")
    figures.count("env_injection_runs", int(canary.exists()))
    assert not canary.exists()
    assert results[0].is_error and "no --yes, prompt or glob approves them" in text_of(results[0])
    [form] = accepting.asked  # only the ordinary names were put to the user
    # The values a person judges, as the form shows every part of a call: escaped JSON.
    assert '"CUDA_VISIBLE_DEVICES": "0,1"' in form and f'"HF_HOME": "{evil}/hf"' in form
    assert token not in form and token[3:11] not in form
