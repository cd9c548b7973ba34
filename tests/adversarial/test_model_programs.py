"""Programs a model can name (issue 39, findings 1 and 4): a `python` the model chose is a
custom program whatever the tool. It runs only when it is the host's configured interpreter,
one the host vouches for (named python*, outside the roots, owned by root or the login user
and writable by no one else, checked where it lives), under a `commands` rule, or on a
person's yes; never on `--yes`.

The attacker's interpreter is what a checkpoint cloned from a hub may carry: an executable
`models/x/python` inside the roots, which leaves a canary when it runs. It is named to the
read-only tools (python_env, preflight for SGLang and vLLM) and, inside `load`, to the
benchmarks that run run_benchmark's inputs themselves (goodput_search, ab_benchmark);
through `sleuth ask --yes`, `sleuth tool`, the test sshd (both call modes) and the official
MCP client. Each refusal has a live control in which a rule for that program lets it run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from sleuth.agent.calls import Call, CallPipeline, execute
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.session import describe_hosts, host_groups
from sleuth.config import ApprovalRules, HostConfig, Limits
from sleuth.hosts.groups import HostGroup
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import Fallback, approver_for
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ApprovalEvent, SessionStarted
from tests.mcp_support import Answering, McpProject, text_of
from tests.scripted_api import message, text, tool_use

from . import figures
from .test_consent import SLEUTH, ask_yes

SandboxFactory = Callable[..., SandboxedHost]
BENCH = ["goodput_search", "ab_benchmark", "run_benchmark"]


def plant(root: Path) -> tuple[Path, Path]:
    """A checkpoint folder inside the roots whose `python` leaves a canary when run."""
    canary = root.parent / f"{root.name}-PYTHON_RAN"
    python = root / "models" / "x" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    (python.parent / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    python.write_text(f"#!/bin/sh\necho ran >> {canary}\nexit 1\n")
    python.chmod(0o755)
    return python, canary


def read_only_calls(python: str, host: str = "local") -> dict[str, tuple[str, dict[str, Any]]]:
    """Each read-only tool that takes an interpreter, given the attacker's."""
    launch = {"host": host, "model_path": str(Path(python).parent), "python": python}
    return {
        "python_env": ("python_env", {"host": host, "python": python}),
        "preflight sglang": ("preflight", {**launch, "engine": "sglang"}),
        "preflight vllm": ("preflight", {**launch, "engine": "vllm"}),
    }


def nested_calls(python: str, host: str = "local") -> dict[str, tuple[str, dict[str, Any]]]:
    """The benchmarks that run run_benchmark inputs (`load`) themselves, given the
    attacker's interpreter there; the endpoint is a closed loopback port (discard)."""
    silent = "http://127.0.0.1:9"
    return {
        "goodput_search": (
            "goodput_search",
            {
                "host": host,
                "load": {"endpoint": silent, "model": "m", "python": python, "duration_s": 1},
                "slo": {"ttft_ms": 100},
                "rate_low": 1,
                "rate_high": 2,
                "max_steps": 2,
            },
        ),
        "ab_benchmark": (
            "ab_benchmark",
            {
                "host": host,
                "a": {"endpoint": silent},
                "b": {"endpoint": silent},
                "load": {"model": "m", "python": python, "concurrency": [1], "num_prompts": 1},
                "repeats": 2,
            },
        ),
    }


def local_context(root: Path, fallback: Fallback, rules: ApprovalRules) -> ToolContext:
    config = HostConfig(roots=[str(root)], allow=BENCH, approve=rules)
    sandbox = SandboxedHost("local", LocalHost("local"), config, Limits())
    return ToolContext(
        hosts={"local": sandbox},
        approver=approver_for(fallback),
        results_dir=root.parent / f"{root.name}-results",
    )


def test_sleuth_ask_yes_runs_no_python_from_a_model_folder(tmp_path: Path) -> None:
    """A scripted model names the checkpoint's `python` to every tool that takes one, under
    `sleuth ask --yes`, with the benchmarks approved by a `tools` rule besides."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    calls = {**read_only_calls(str(python)), **nested_calls(str(python))}
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{root}"]\nallow = {json.dumps(BENCH)}\n\n'
        '[hosts.local.approve]\ntools = ["goodput_search", "ab_benchmark", "run_benchmark"]\n'
    )
    uses = [
        tool_use(f"toolu_{i}", name, **{k: v for k, v in raw.items() if k != "host"})
        for i, (name, raw) in enumerate(calls.values())
    ]
    script = [message(text("Checking the environment."), *uses), message(text("Done."))]
    approvals, executed = ask_yes(tmp_path, "Check the environment.", script)

    figures.count("model_programs_variants", 3)
    figures.count("nested_inputs_variants", 2)
    figures.count("model_programs_runs", int(canary.exists()))
    assert not canary.exists()
    for i in range(len(calls)):
        approval = approvals[f"toolu_{i}"]
        assert not approval.approved and approval.rule == "hosts.local.approve.commands"
        assert approval.argv == [str(python)]
        result = executed[f"toolu_{i}"].result
        assert result.refused and "never approves a custom command" in result.output


def sleuth_tool(cwd: Path, name: str, raw: dict[str, Any], *flags: str) -> dict[str, Any]:
    pairs = [
        f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}"
        for k, v in raw.items()
        if k != "host"
    ]
    done = subprocess.run(
        [*SLEUTH, "tool", name, *pairs, "--json", *flags],
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


@pytest.mark.parametrize("call", ["python_env", "preflight vllm", "goodput_search"])
def test_sleuth_tool_asks_a_person_and_only_a_person_or_a_rule_runs_it(
    tmp_path: Path, call: str
) -> None:
    """Non-interactive, the call is refused naming the rule to write; the person's own
    `sleuth tool ... --yes`, or that rule, runs it (the controls)."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    name, raw = {**read_only_calls(str(python)), **nested_calls(str(python))}[call]
    toml = tmp_path / "sleuth.toml"
    toml.write_text(f'[hosts.local]\nroots = ["{root}"]\nallow = {json.dumps(BENCH)}\n')
    refused = sleuth_tool(tmp_path, name, raw)
    figures.count("nested_inputs_variants" if name in BENCH else "model_programs_variants")
    figures.count("model_programs_runs", int(canary.exists()))
    assert not canary.exists()
    assert refused["error_kind"] == "not_approved", refused
    assert f"commands = [{json.dumps([str(python)])}]" in refused["error"]

    sleuth_tool(tmp_path, name, raw, "--yes")  # a person's consent to this one call
    assert canary.exists()
    canary.unlink()
    toml.write_text(toml.read_text() + f"\n[hosts.local.approve]\ncommands = [[{str(python)!r}]]\n")
    sleuth_tool(tmp_path, name, raw)
    assert canary.exists()


@pytest.mark.parametrize("fallback", ["yes", "refuse"])
def test_a_tools_rule_or_yes_does_not_run_the_python_a_load_names(
    tmp_path: Path, fallback: Fallback
) -> None:
    """goodput_search and ab_benchmark used to run `load.python` on their own approval: a
    `tools` rule, or `--yes`, which never approves run_benchmark's own `python`."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    rules = ApprovalRules(tools=["goodput_search", "ab_benchmark"] if fallback == "refuse" else [])
    for name, raw in nested_calls(str(python)).values():
        result = execute(local_context(root, fallback, rules), name, raw)
        figures.count("nested_inputs_variants")
        figures.count("model_programs_runs", int(canary.exists()))
        assert result.refused and not canary.exists(), (name, result.error)
        ruled = ApprovalRules(commands=[[str(python)]])
        approved = execute(local_context(root, fallback, ruled), name, raw)
        assert not approved.refused and canary.exists(), (name, approved.error)
        canary.unlink()


def vouched_python(tmp_path: Path) -> Path:
    """An interpreter outside the roots, as an engine's venv keeps one: this Python."""
    venv = tmp_path / "engine-venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    return venv / "python"


def remote(factory: SandboxFactory, root: Path, rules: ApprovalRules) -> SandboxedHost:
    connected = factory("remote", [str(root)], BENCH)
    config = HostConfig(ssh=connected.config.ssh, roots=[str(root)], allow=BENCH, approve=rules)
    return SandboxedHost("remote", connected.host, config, Limits())


@pytest.mark.ssh
def test_over_ssh_the_host_judges_the_python_where_it_lives(
    tmp_path: Path, ssh_host_factory: SandboxFactory
) -> None:
    """Over the test sshd (resident and exec): the checkpoint's `python`, one outside the
    roots but writable by others, and one owned by another user are refused under --yes;
    a venv's interpreter outside the roots is vouched for by the host and runs; a rule for
    the checkpoint's runs it."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    shared = tmp_path / "shared-env" / "bin"
    shared.mkdir(parents=True)
    (shared / "python3").symlink_to(sys.executable)
    shared.chmod(0o777)
    foreign = tmp_path / "foreign-env" / "bin"
    foreign.mkdir(parents=True)
    (foreign / "python3").write_text(f"#!/bin/sh\necho ran >> {canary}\nexit 1\n")
    (foreign / "python3").chmod(0o755)
    os.chown(foreign / "python3", 65534, 65534)
    calls = {
        **read_only_calls(str(python), "remote"),
        **nested_calls(str(python), "remote"),
        "writable by others": ("python_env", {"host": "remote", "python": str(shared / "python3")}),
        "another user's": ("python_env", {"host": "remote", "python": str(foreign / "python3")}),
    }
    sandbox = remote(ssh_host_factory, root, ApprovalRules())
    ctx = ToolContext(hosts={"remote": sandbox}, approver=approver_for("yes"))
    for what, (name, raw) in calls.items():
        result = execute(ctx, name, raw)
        figures.count("nested_inputs_variants" if name in BENCH else "model_programs_variants")
        figures.count("model_programs_runs", int(canary.exists()))
        assert result.refused and not canary.exists(), (what, result.error)
    shared.chmod(0o755)

    vouched = vouched_python(tmp_path)
    found = execute(ctx, "python_env", {"host": "remote", "python": str(vouched)})
    assert found.ok, found.error
    assert found.data is not None and found.data["python"]

    ruled = remote(ssh_host_factory, root, ApprovalRules(commands=[[str(python)]]))
    ctx = ToolContext(hosts={"remote": ruled}, approver=approver_for("yes"))
    execute(ctx, "python_env", {"host": "remote", "python": str(python)})
    assert canary.exists()


def test_the_approval_of_a_vouched_interpreter_names_the_host(tmp_path: Path) -> None:
    """A read-only call on an interpreter the host vouches for runs without anyone asked,
    and its approval event says so; the configured interpreter needs no approval at all."""
    root = tmp_path / "deploy"
    root.mkdir()
    vouched = vouched_python(tmp_path)
    seen: list[Any] = []
    ctx = local_context(root, "refuse", ApprovalRules())
    ctx.on_approval = lambda request, decision: seen.append(decision)
    result = execute(ctx, "python_env", {"python": str(vouched)})
    assert result.ok, result.error
    [decision] = seen
    assert decision.approved and decision.by == "host"
    assert "vouched for by host 'local'" in decision.rule
    seen.clear()
    plain = execute(ctx, "python_env", {})
    assert plain.ok and seen == []


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_over_mcp_no_client_runs_the_python_of_a_model_folder(
    tmp_path: Path, transport: str
) -> None:
    """Through the official client: one that cannot elicit is refused with the rule to
    write; a user who declines the form runs nothing. Both for python_env and for
    goodput_search's `load.python`."""
    project = McpProject.create(tmp_path, allow=BENCH)
    python, canary = plant(project.root)
    calls = {**read_only_calls(str(python)), **nested_calls(str(python))}
    declining = Answering("decline")
    results: dict[str, types.CallToolResult] = {}

    async def session() -> None:
        async with project.client(transport) as client:
            for what, (name, raw) in calls.items():
                results[f"no elicitation: {what}"] = await client.call_tool(name, raw)
        async with project.client(transport, elicit=declining) as client:
            for what, (name, raw) in calls.items():
                results[f"declined: {what}"] = await client.call_tool(name, raw)

    anyio.run(session)
    figures.count("model_programs_variants", 6)
    figures.count("nested_inputs_variants", 4)
    figures.count("model_programs_runs", int(canary.exists()))
    assert not canary.exists()
    for what, result in results.items():
        assert result.is_error, what
        said = text_of(result)
        assert ("cannot ask you" in said) if what.startswith("no") else ("declined" in said)
    assert len(declining.asked) == len(calls)
    assert all(str(python) in asked for asked in declining.asked)


@pytest.mark.parametrize("fallback", ["yes", "ask"])
def test_a_fleet_call_runs_the_python_only_under_the_groups_rule(
    tmp_path: Path, fallback: Fallback
) -> None:
    """python_env on `@pair` with the model folder's `python`: no --yes or prompt fans it
    out; each member's part is refused unless the group's `commands` rule names it."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    raw = {"host": "@pair", "python": str(python)}

    def fleet(rules: ApprovalRules) -> ToolContext:
        config = HostConfig(roots=[str(root)])
        hosts = {n: SandboxedHost(n, LocalHost(n), config, Limits()) for n in ("a", "b")}
        groups = {"pair": HostGroup("pair", ("a", "b"), rules)}
        return ToolContext(hosts=hosts, approver=approver_for(fallback), groups=groups)

    def run(ctx: ToolContext) -> list[ApprovalEvent]:
        start = SessionStarted(
            session_id="t", question="q", hosts=describe_hosts(ctx), brain="test",
            groups=host_groups(ctx),
        )  # fmt: skip
        events: list[Any] = []
        CallPipeline(ctx, events.append, fleet=FleetView.of(start)).tool(
            Call("c1", "python_env", raw), 1
        )
        return [e for e in events if isinstance(e, ApprovalEvent)]

    refused = run(fleet(ApprovalRules()))
    figures.count("model_programs_variants")
    figures.count("model_programs_runs", int(canary.exists()))
    assert not canary.exists()
    assert len(refused) == 2 and not any(e.approved for e in refused)
    assert all(e.rule == "groups.pair.approve" for e in refused)
    approved = run(fleet(ApprovalRules(commands=[[str(python)]])))
    assert all(e.approved for e in approved)
    assert canary.read_text().count("ran") == 2  # the control: one run per member


def test_the_person_who_types_sleuth_preflight_python_consents_to_it(tmp_path: Path) -> None:
    """`sleuth preflight --python PATH` is the person's own choice, as `sleuth tool --yes`."""
    root = tmp_path / "deploy"
    python, canary = plant(root)
    (tmp_path / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{root}"]\n')
    subprocess.run(
        [*SLEUTH, "preflight", "sglang", str(python.parent), "--python", str(python), "--json"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    assert canary.exists()


def test_a_real_interpreter_behind_a_model_folders_venv_is_not_vouched_for(
    tmp_path: Path,
) -> None:
    """A model folder shaped as a venv whose `bin` links to a real one outside the roots: the
    interpreter is real and safe, but run from there it reads the folder's pyvenv.cfg and
    runs its site-packages' .pth files. Refused under --yes; a rule runs it (and the .pth)."""
    root = tmp_path / "deploy"
    canary = tmp_path / "PTH_RAN"
    real_bin = vouched_python(tmp_path).parent
    fake = root / "models" / "x" / "v"
    site = fake / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    (site / "site-packages").mkdir(parents=True)
    (site / "site-packages" / "evil.pth").write_text(f"import os; os.system('touch {canary}')\n")
    (fake / "pyvenv.cfg").write_text(f"home = {Path(os.path.realpath(sys.executable)).parent}\n")
    (fake / "bin").symlink_to(real_bin)
    python = str(fake / "bin" / "python")
    refused = execute(local_context(root, "yes", ApprovalRules()), "python_env", {"python": python})
    figures.count("model_programs_variants")
    figures.count("model_programs_runs", int(canary.exists()))
    assert refused.refused and not canary.exists(), refused.error
    assert "lies under the host's roots" in (refused.error or "")
    ruled = local_context(root, "yes", ApprovalRules(commands=[[python]]))
    execute(ruled, "python_env", {"python": python})
    assert canary.exists()
