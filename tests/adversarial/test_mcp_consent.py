"""Consent over MCP, attacked through the official client: a client approves nothing itself.

A client without elicitation forges `inputResponses` / `requestState` every way we know (the
old unkeyed sha256 of the call, a made-up state in the keyed format, an answer with no state,
an empty state), over stdio and streamable HTTP, in both protocol eras; a state the server
really issued is replayed in another session, for other arguments, and a second time. The
launch would `touch` a canary: it stays absent. With a rule in sleuth.toml the same call runs,
and its approval event names the rule. A model-chosen `python` never runs when the call is
refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from sleuth.agent.calls import execute
from sleuth.config import ApprovalRules, HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.mcp.consent import ConsentTokens
from sleuth.tools.approval import Fallback, approver_for
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ApprovalEvent
from tests.mcp_support import Answering, McpProject, text_of

from . import figures

ACCEPT = types.ElicitResult(action="accept", content={"approve": True})


def launch(canary: Path) -> dict[str, Any]:
    return {
        "host": "local",
        "engine": "command",
        "command": ["touch", str(canary)],
        "ready_log_line": "never printed",
        "poll_s": 0.1,
        "timeout_s": 5,
    }


def old_sha256(name: str, arguments: dict[str, Any]) -> str:
    """The requestState Sleuth used to accept: anyone can compute it."""
    body = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


Forgery = Callable[[dict[str, Any]], tuple[dict[str, Any], str | None]]
FORGERIES: dict[str, Forgery] = {
    "old unkeyed sha256": lambda args: (
        {"approval": ACCEPT},
        old_sha256("launch_server", args),
    ),
    "made-up keyed state": lambda args: ({"approval": ACCEPT}, "s1." + "A" * 24 + "." + "0" * 64),
    "answer without state": lambda args: ({"approval": ACCEPT}, None),
    "empty state": lambda args: ({"approval": ACCEPT}, ""),
}


def project_for(tmp_path: Path, rules: str = "") -> McpProject:
    project = McpProject.create(tmp_path, allow=["launch_server"])
    if rules:
        toml = project.root / "sleuth.toml"
        toml.write_text(toml.read_text() + f"\n[hosts.local.approve]\n{rules}\n")
    return project


@pytest.mark.parametrize("forgery", list(FORGERIES))
@pytest.mark.parametrize(
    ("transport", "mode"),
    [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")],
)
def test_a_client_without_elicitation_cannot_approve_its_own_call(
    tmp_path: Path, transport: str, mode: str, forgery: str
) -> None:
    project = project_for(tmp_path)
    canary = tmp_path / "CANARY"
    args = launch(canary)
    responses, state = FORGERIES[forgery](args)
    results: list[types.CallToolResult] = []

    async def session() -> None:
        async with project.client(transport, mode=mode) as client:
            results.append(
                await client.call_tool(
                    "launch_server", args, input_responses=responses, request_state=state
                )
            )

    anyio.run(session)

    figures.count("mcp_forged_consent_runs", int(canary.exists()))
    figures.count("mcp_forged_consent_variants", 1)
    assert not canary.exists()
    [result] = results
    assert result.is_error
    said = text_of(result)
    assert "cannot ask you" in said and "[hosts.local.approve]" in said
    assert f'commands = [["touch", "{canary}"]]' in said
    [approval] = [e for e in project.transcript() if isinstance(e, ApprovalEvent)]
    assert not approval.approved and approval.rule == "no rule"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_with_a_rule_the_call_runs_and_its_approval_names_the_rule(
    tmp_path: Path, transport: str
) -> None:
    project = project_for(tmp_path, 'commands = [["touch"]]')
    canary = tmp_path / "CANARY"

    async def session() -> None:
        async with project.client(transport) as client:
            await client.call_tool("launch_server", launch(canary))

    anyio.run(session)

    assert canary.exists()
    [approval] = [e for e in project.transcript() if isinstance(e, ApprovalEvent)]
    assert approval.approved and approval.by == "rule"
    assert approval.rule == 'hosts.local.approve.commands[0] = ["touch"]'
    assert approval.argv == ["touch", str(canary)]


async def issued_state(client: Any, args: dict[str, Any]) -> str:
    """A requestState the server really issued: the question of a pending call."""
    pending = await client.session.call_tool("launch_server", args, allow_input_required=True)
    assert isinstance(pending, types.InputRequiredResult), pending
    assert pending.request_state
    return pending.request_state


def test_a_real_state_does_not_travel_to_another_session_other_arguments_or_a_second_use(
    tmp_path: Path,
) -> None:
    project = project_for(tmp_path)
    first, other, again = tmp_path / "FIRST", tmp_path / "OTHER", tmp_path / "AGAIN.log"
    appends = {
        **launch(again),
        "command": ["sh", "-c", f"echo ran >> {again}"],
    }
    declining = Answering("decline")
    outcomes: dict[str, types.CallToolResult] = {}
    states: dict[str, str] = {}

    async def one_session() -> None:
        async with project.client("stdio", elicit=declining) as client:
            states["first"] = await issued_state(client, launch(first))
            # The state of `first`, with an accepting answer, for another command.
            outcomes["other arguments"] = await client.call_tool(
                "launch_server",
                launch(other),
                input_responses={"approval": ACCEPT},
                request_state=states["first"],
            )
            states["again"] = await issued_state(client, appends)
            outcomes["first use"] = await client.call_tool(
                "launch_server",
                appends,
                input_responses={"approval": ACCEPT},
                request_state=states["again"],
            )
            outcomes["second use"] = await client.call_tool(
                "launch_server",
                appends,
                input_responses={"approval": ACCEPT},
                request_state=states["again"],
            )

    async def another_session() -> None:
        async with project.client("stdio") as client:
            outcomes["another session"] = await client.call_tool(
                "launch_server",
                launch(first),
                input_responses={"approval": ACCEPT},
                request_state=states["first"],
            )

    anyio.run(one_session)
    anyio.run(another_session)

    ran = [p.name for p in (first, other) if p.exists()]
    runs = again.read_text().count("ran") if again.exists() else 0
    figures.count("mcp_forged_consent_runs", len(ran) + max(0, runs - 1))
    figures.count("mcp_forged_consent_variants", 3)
    assert ran == []
    assert runs == 1  # the one real answer ran it once; its replay was asked again, declined
    # Each forged answer was ignored and the user asked instead (and declined).
    assert len(declining.asked) == 2
    assert "declined by the user" in text_of(outcomes["other arguments"])
    assert "declined by the user" in text_of(outcomes["second use"])
    assert "cannot ask you" in text_of(outcomes["another session"])


def test_consent_tokens_are_keyed_single_use_bound_and_expire() -> None:
    now = [0.0]
    tokens = ConsentTokens(ttl_s=10, clock=lambda: now[0])
    args = {"host": "gpu1", "server_id": "srv-1"}
    good = tokens.issue("s1", "stop_server", args)
    assert not tokens.redeem(good, "s2", "stop_server", args)
    assert not tokens.redeem(good, "s1", "launch_server", args)
    assert not tokens.redeem(good, "s1", "stop_server", {**args, "server_id": "srv-2"})
    assert not tokens.redeem(good.replace(good[-4:], "0000"), "s1", "stop_server", args)
    assert not ConsentTokens().redeem(good, "s1", "stop_server", args)  # another server's key
    assert tokens.redeem(good, "s1", "stop_server", args)
    assert not tokens.redeem(good, "s1", "stop_server", args)  # used up
    late = tokens.issue("s1", "stop_server", args)
    now[0] = 11.0
    assert not tokens.redeem(late, "s1", "stop_server", args)
    assert "secret" not in repr(tokens) and good.split(".")[1] not in repr(tokens)


def canary_python(tmp_path: Path) -> tuple[Path, Path]:
    """An executable a model names as its `python`: running it at all leaves a file."""
    canary = tmp_path / "PYTHON_RAN"
    script = tmp_path / "env" / "bin" / "python"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/bin/sh\necho ran >> {canary}\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, canary


def context(tmp_path: Path, fallback: Fallback, rules: ApprovalRules) -> ToolContext:
    (tmp_path / "models").mkdir(exist_ok=True)
    config = HostConfig(roots=[str(tmp_path)], allow=["launch_server"], approve=rules)
    sandbox = SandboxedHost("local", LocalHost("local"), config, Limits())
    return ToolContext(hosts={"local": sandbox}, approver=approver_for(fallback))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize("fallback", ["yes", "refuse"])
def test_a_model_chosen_python_never_runs_when_the_call_is_refused(
    tmp_path: Path, engine: str, fallback: Fallback
) -> None:
    script, canary = canary_python(tmp_path)
    call = {"engine": engine, "model_path": "models", "python": str(script), "timeout_s": 5}
    refused = execute(
        context(tmp_path, fallback, ApprovalRules(engines=[engine])), "launch_server", call
    )
    figures.count("consent_model_python_runs", int(canary.exists()))
    assert refused.refused and not canary.exists(), refused.error

    # The control: a rule for exactly that program approves it, and then it does run (the
    # vLLM entry probe, or the launch itself), so the absence above is the refusal's doing.
    program = str(script.parent / "vllm") if engine == "vllm" else str(script)
    approved = execute(
        context(tmp_path, fallback, ApprovalRules(commands=[[program]])), "launch_server", call
    )
    assert not approved.refused, approved.error
    assert canary.exists() and os.path.getsize(canary) > 0
