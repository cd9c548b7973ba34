"""Consent as rules: which calls a host's rules approve, what --yes adds (never a custom
command no rule matches), what a person's `sleuth tool ... --yes` adds, and the rule each
decision names. Decisions go through `execute`, so the argv they see is the one that runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.cli.common import describe_request
from sleuth.config import ApprovalRules, ConfigError, HostConfig, Limits, load_settings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.mcp.approval import message
from sleuth.tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    Fallback,
    approver_for,
)
from sleuth.tools.context import ToolContext
from sleuth.tools.startup_env import env_cover, start_up

ALLOW = ["launch_server", "stop_server", "run_benchmark"]
SGLANG = ["python3", "-m", "sglang.launch_server"]


def decide(
    tmp_path: Path, fallback: Fallback, rules: ApprovalRules, call: dict[str, Any]
) -> tuple[ApprovalDecision | None, ApprovalRequest | None]:
    """Run `call` through execute with an approver that records its decision and then
    refuses, so nothing starts; returns what the policy decided."""
    (tmp_path / "models").mkdir(exist_ok=True)
    config = HostConfig(roots=[str(tmp_path)], allow=ALLOW, approve=rules)
    policy = approver_for(fallback, ask=lambda request: True)
    seen: list[tuple[ApprovalRequest, ApprovalDecision]] = []

    def record_then_refuse(request: ApprovalRequest) -> ApprovalDecision:
        seen.append((request, policy(request)))
        return ApprovalDecision(approved=False, by="test", reason="recorded only")

    sandbox = SandboxedHost("gpu1", LocalHost("gpu1"), config, Limits())
    ctx = ToolContext(hosts={"gpu1": sandbox}, approver=record_then_refuse)
    result = execute(ctx, call["tool"], {"host": "gpu1", **call["input"]})
    assert not result.ok and result.refused
    return (seen[0][1], seen[0][0]) if seen else (None, None)


COMMAND = {
    "tool": "launch_server",
    "input": {"engine": "command", "command": ["sh", "-c", "id > pwned"], "ready_log_line": "x"},
}
PRESET = {"tool": "launch_server", "input": {"engine": "sglang", "model_path": "models"}}
OWN_PYTHON = {
    "tool": "launch_server",
    "input": {"engine": "sglang", "model_path": "models", "python": "/tmp/evil"},
}
STOP = {"tool": "stop_server", "input": {"server_id": "srv-20260101-000000-abcdef"}}


def test_yes_approves_an_allowed_engine_preset_and_names_the_allow_rule(tmp_path: Path) -> None:
    decision, request = decide(tmp_path, "yes", ApprovalRules(), PRESET)
    assert decision is not None and request is not None
    assert decision.approved and decision.by == "--yes"
    assert decision.rule == "--yes with hosts.gpu1.allow: launch_server"
    assert request.argv is not None and request.argv[:3] == SGLANG  # the argv that would run
    assert request.argv[request.argv.index("--model-path") + 1] == str(tmp_path / "models")


def test_yes_never_approves_a_custom_command_no_rule_matches(tmp_path: Path) -> None:
    rules = ApprovalRules(commands=[SGLANG])
    decision, request = decide(tmp_path, "yes", rules, COMMAND)
    assert decision is not None and request is not None
    assert not decision.approved and decision.by == "rule"
    assert decision.rule == "hosts.gpu1.approve.commands"
    assert request.argv == ["sh", "-c", "id > pwned"]
    # The refusal says what would permit it, and that --yes will not.
    assert (
        "[hosts.gpu1.approve]" in decision.reason
        and "never approves a custom command" in decision.reason
    )


def test_a_preset_with_its_own_python_is_a_custom_command(tmp_path: Path) -> None:
    decision, _ = decide(tmp_path, "yes", ApprovalRules(engines=["sglang"]), OWN_PYTHON)
    assert decision is not None and not decision.approved
    rules = ApprovalRules(commands=[["/tmp/evil", "-m", "sglang.launch_server"]])
    decision, _ = decide(tmp_path, "refuse", rules, OWN_PYTHON)
    assert decision is not None and decision.approved
    assert decision.rule.startswith("hosts.gpu1.approve.commands[0]")


def test_a_matching_command_rule_approves_without_asking_and_is_named(tmp_path: Path) -> None:
    rules = ApprovalRules(commands=[["python3", "-m", "vllm"], ["sh", "-c"]])
    decision, _ = decide(tmp_path, "refuse", rules, COMMAND)
    assert decision is not None and decision.approved and decision.by == "rule"
    assert decision.rule == 'hosts.gpu1.approve.commands[1] = ["sh", "-c"]'
    # A prefix must match argument by argument, not as text.
    decision, _ = decide(tmp_path, "yes", ApprovalRules(commands=[["sh", "-c", "id"]]), COMMAND)
    assert decision is not None and not decision.approved


def test_engine_and_tool_rules_approve_without_a_person(tmp_path: Path) -> None:
    decision, _ = decide(tmp_path, "refuse", ApprovalRules(engines=["sglang"]), PRESET)
    assert decision is not None and decision.approved
    assert decision.rule == "hosts.gpu1.approve.engines: sglang"
    decision, _ = decide(tmp_path, "refuse", ApprovalRules(engines=["vllm"]), PRESET)
    assert decision is not None and not decision.approved and "--yes" in decision.reason
    assert 'set `engines = ["sglang"]` under [hosts.gpu1.approve]' in decision.reason
    decision, _ = decide(tmp_path, "refuse", ApprovalRules(tools=["stop_server"]), STOP)
    assert decision is not None and decision.approved
    assert decision.rule == "hosts.gpu1.approve.tools: stop_server"


@pytest.mark.parametrize("call", [COMMAND, PRESET, STOP], ids=["command", "preset", "stop"])
def test_a_person_at_the_prompt_or_typing_yes_decides_any_allowed_call(
    tmp_path: Path, call: dict[str, Any]
) -> None:
    decision, _ = decide(tmp_path, "person", ApprovalRules(), call)
    assert decision is not None and decision.approved and decision.rule == "sleuth tool --yes"
    decision, _ = decide(tmp_path, "ask", ApprovalRules(), call)
    assert decision is not None and decision.approved and decision.rule == "prompt"


def test_nothing_outside_allow_reaches_an_approver(tmp_path: Path) -> None:
    config = HostConfig(roots=[str(tmp_path)], allow=[])
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(approved=True, by="test")

    sandbox = SandboxedHost("gpu1", LocalHost("gpu1"), config, Limits())
    ctx = ToolContext(hosts={"gpu1": sandbox}, approver=approve)
    result = execute(ctx, "launch_server", {"host": "gpu1", **COMMAND["input"]})
    assert not result.ok and result.refused and asked == []
    assert "not allowed" in (result.error or "")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sleuth.toml"
    path.write_text(text)
    return path


def test_approval_rules_load_from_sleuth_toml(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[hosts.gpu1]\nssh = "gpu1"\nallow = ["launch_server", "stop_server"]\n\n'
        '[hosts.gpu1.approve]\ntools = ["stop_server"]\nengines = ["sglang"]\n'
        'commands = [["python3", "-m", "sglang.launch_server"]]\n',
    )
    rules = load_settings(path, cwd=tmp_path).hosts["gpu1"].approve
    assert rules == ApprovalRules(tools=["stop_server"], engines=["sglang"], commands=[SGLANG])


@pytest.mark.parametrize(
    ("approve", "message"),
    [
        ('tools = ["launch_server"]', "approved per engine and per command"),
        ('tools = ["run_benchmark"]', "Set `allow = ['launch_server', 'run_benchmark']`"),
        ("commands = [[]]", "empty argv"),
        ('engines = ["command"]', "approve.engines"),
    ],
)
def test_rules_that_cannot_mean_what_they_say_are_refused_at_their_line(
    tmp_path: Path, approve: str, message: str
) -> None:
    path = write(
        tmp_path,
        '[hosts.gpu1]\nssh = "gpu1"\nallow = ["launch_server"]\n\n'
        f"[hosts.gpu1.approve]\n{approve}\n",
    )
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert f"{path}:6" in str(err.value) and message in str(err.value)


SGLANG_ENV = {
    "tool": "launch_server",
    "input": {
        "engine": "sglang",
        "model_path": "models",
        "env": {"SGLANG_LOG": "value-7741", "HF_HOME": "value-7742"},
    },
}


def test_yes_never_approves_environment_names_no_rule_lists(tmp_path: Path) -> None:
    decision, request = decide(tmp_path, "yes", ApprovalRules(engines=["sglang"]), SGLANG_ENV)
    assert decision is not None and request is not None
    assert not decision.approved and decision.rule == "hosts.gpu1.approve.env"
    assert 'env = ["HF_HOME", "SGLANG_LOG"]' in decision.reason
    assert request.env == ["HF_HOME", "SGLANG_LOG"]
    # Values are shown, so a person can judge a path into a model folder.
    assert request.input["env"] == {"SGLANG_LOG": "value-7741", "HF_HOME": "value-7742"}


@pytest.mark.parametrize(
    "name",
    [
        "SGLANG_LOGGING_CONFIG_PATH",
        "VLLM_LOGGING_CONFIG_PATH",
        "TRITON_PTXAS_PATH",
        "TRITON_PTXAS_BLACKWELL_PATH",
        "TRITON_CUOBJDUMP_PATH",
        "TRITON_NVDISASM_PATH",
        "TRITON_LIBCUDA_PATH",
        "TRITON_CACHE_MANAGER",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "VLLM_CACHE_ROOT",
        "TORCH_EXTENSIONS_DIR",
        "HF_MODULES_CACHE",
        "CUDA_HOME",
        "CUDA_PATH",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "REQUESTS_CA_BUNDLE",
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "HF_ENDPOINT",
    ],
)
def test_the_readme_globs_do_not_approve_an_engine_code_variable(tmp_path: Path, name: str) -> None:
    """`SGLANG_*` (the README's example) and its kin approved these; a person cannot either."""
    globs = ["SGLANG_*", "VLLM_*", "TRITON_*", "TORCH*", "HF_*", "CUDA_*", "*_PROXY", "*"]
    call = {**SGLANG_ENV, "input": {**SGLANG_ENV["input"], "env": {name: "/models/x/evil"}}}
    assert start_up(name)
    for fallback in ("yes", "ask", "person"):
        rules = ApprovalRules(engines=["sglang"], env=globs)
        decision, _ = decide(tmp_path, fallback, rules, call)
        assert decision is None, (name, fallback)  # refused before anyone was asked
    named = ApprovalRules(engines=["sglang"], env=[name])
    decision, _ = decide(tmp_path, "refuse", named, call)
    assert decision is not None and decision.approved


def test_an_env_rule_with_globs_approves_ordinary_names_and_is_named(tmp_path: Path) -> None:
    rules = ApprovalRules(engines=["sglang"], env=["SGLANG_*", "HF_HOME"])
    decision, _ = decide(tmp_path, "refuse", rules, SGLANG_ENV)
    assert decision is not None and decision.approved
    assert decision.rule == (
        "hosts.gpu1.approve.engines: sglang; hosts.gpu1.approve.env: HF_HOME, SGLANG_*"
    )
    decision, _ = decide(tmp_path, "person", ApprovalRules(), SGLANG_ENV)
    assert decision is not None and decision.approved  # a person's own call


@pytest.mark.parametrize("fallback", ["yes", "ask", "person"])
def test_start_up_variables_are_approved_only_by_a_rule_that_names_them(
    tmp_path: Path, fallback: Fallback
) -> None:
    call = {"tool": "launch_server", "input": {**PRESET["input"], "env": {"LD_PRELOAD": "/x.so"}}}
    rules = ApprovalRules(engines=["sglang"], env=["*", "LD_*"])
    decision, _ = decide(tmp_path, fallback, rules, call)
    # Refused before any approver was asked, whoever would have been.
    assert decision is None
    named = ApprovalRules(engines=["sglang"], env=["LD_PRELOAD"])
    decision, _ = decide(tmp_path, fallback, named, call)
    assert decision is not None and decision.approved
    assert decision.rule.endswith("hosts.gpu1.approve.env: LD_PRELOAD")


def test_start_up_names_match_families_and_globs() -> None:
    for name in ("LD_PRELOAD", "PYTHONWARNINGS", "BASH_ENV", "GIT_SSH_COMMAND", "NCCL_NET_PLUGIN"):
        assert start_up(name), name
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "HF_HOME",
        "SGLANG_LOG_LEVEL",
        "ENVIRONMENT",
        "NCCL_DEBUG",
    ):
        assert not start_up(name), name
    cover = env_cover(["PYTHONPATH", "HF_HOME", "XYZ"], ["PYTHON*", "HF_*"])
    assert (cover.listed, cover.unlisted, cover.start_up) == (["HF_*"], ["XYZ"], ["PYTHONPATH"])


def test_consent_is_decided_before_the_host_is_reached(tmp_path: Path) -> None:
    """An SSH host nobody can reach: the approval shows the planned command line, made from
    the inputs and sleuth.toml alone; nothing (no path, no vLLM probe) touched the host."""
    config = HostConfig(ssh="nowhere", roots=["/models"], allow=ALLOW)
    asked: list[ApprovalRequest] = []

    def refuse(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(approved=False, by="test", reason="no")

    host = SSHHost("gpu1", "nobody@127.0.0.1:1", known_hosts=tmp_path / "known_hosts")
    sandbox = SandboxedHost("gpu1", host, config, Limits())
    ctx = ToolContext(hosts={"gpu1": sandbox}, approver=refuse)
    call = {"host": "gpu1", "engine": "vllm", "model_path": "ds", "python": "/opt/v/bin/python"}
    result = execute(ctx, "launch_server", call)
    assert result.error_kind == "not_approved", result.error
    [request] = asked
    assert request.argv is not None
    assert request.argv[:3] == ["/opt/v/bin/vllm", "serve", "/models/ds"]


@pytest.mark.parametrize("bad", ['"ld_preload"', '"LD PRELOAD"', '"A*B"'])
def test_env_rules_must_be_names_or_prefixes(tmp_path: Path, bad: str) -> None:
    path = write(
        tmp_path,
        '[hosts.gpu1]\nssh = "gpu1"\nallow = ["launch_server"]\n\n'
        f"[hosts.gpu1.approve]\nenv = [{bad}]\n",
    )
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert "approve.env" in str(err.value)


def test_the_prompt_and_the_mcp_question_show_env_values_but_secret_ones(tmp_path: Path) -> None:
    """A person judges a path into a model folder by its value; a token stays hidden."""
    token = "hf_" + "Zq8Lm3Vt6Rp1Wn4Ys7Xc2Bk5Jd9Gf0Ha"
    env = {**SGLANG_ENV["input"]["env"], "HF_TOKEN": token}
    call = {**SGLANG_ENV, "input": {**SGLANG_ENV["input"], "env": env}}
    _, request = decide(tmp_path, "ask", ApprovalRules(engines=["sglang"]), call)
    assert request is not None
    for shown in (describe_request(request).plain, message(request)):
        assert "HF_HOME" in shown and "SGLANG_LOG" in shown and "HF_TOKEN" in shown
        assert "value-7741" in shown and "value-7742" in shown
        assert token[3:11] not in shown
        assert "sglang.launch_server" in shown  # the command line it would run
