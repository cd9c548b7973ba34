"""One question across a fleet: the 16-host test fleet (tests/fleet_support.py) with three planted
drifts and one host that cannot be reached, asked through the call pipeline and the offline
playbook, recorded and replayed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import Call, CallPipeline, run_live
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.replay.run import replay
from sleuth.agent.session import describe_hosts, host_groups, run_cli_call, start_investigation
from sleuth.config import Settings, load_settings
from sleuth.hosts.groups import select_hosts
from sleuth.mcp.session import ClientInfo, McpSession
from sleuth.tools.approval import approver_for, deny_all
from sleuth.tools.context import ToolContext, build_context
from sleuth.tools.registry import Tool, ToolInput
from sleuth.transcripts.events import ApprovalEvent, Finding, SessionStarted, ToolExecuted
from sleuth.transcripts.fleet import FleetResult, part_id
from sleuth.transcripts.hostlist import expand
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import load
from tests.fleet_support import (
    DRIFT_FLAG,
    DRIFT_SGLANG,
    GROUP,
    SGLANG,
    Fleet,
    build_fleet,
)
from tests.sshd import SSHServer


@pytest.fixture(scope="module")
def fleet(sshd: SSHServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    built = build_fleet(tmp_path_factory.mktemp("fleet"), sshd)
    try:
        yield built
    finally:
        built.stop()


@pytest.fixture
def settings(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("HOME", str(fleet.home))
    return load_settings(fleet.config, cwd=fleet.dir)


def fleet_ctx(settings: Settings, **changes: Any) -> ToolContext:
    chosen = select_hosts(settings, specs=[GROUP])
    ctx = build_context(chosen.settings, chosen.names, groups=chosen.groups)
    for key, value in changes.items():
        setattr(ctx, key, value)
    return ctx


def grouped(result: ToolResult) -> FleetResult:
    return FleetResult.model_validate(result.data)


def test_one_call_groups_the_hosts_and_records_each_hosts_raw_output(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    ctx = fleet_ctx(settings)
    try:
        result, path = run_cli_call(tmp_path, ctx, "python_env", {"host": f"@{GROUP}"})
    finally:
        ctx.close()
    found = grouped(result)
    verdicts = {g.verdict: g for g in found.groups}
    assert set(verdicts) == {"majority", "outlier", "unreachable"}
    assert verdicts["outlier"].hosts == [fleet.drifts["version"]]
    assert verdicts["unreachable"].hosts == [fleet.unreachable]
    assert sorted(verdicts["majority"].hosts) == sorted(
        h for h in fleet.reachable if h != fleet.drifts["version"]
    )
    assert f"-sglang {SGLANG} at <root>/venv" in verdicts["outlier"].diff
    assert f"+sglang {DRIFT_SGLANG} at <root>/venv" in verdicts["outlier"].diff
    # The model reads the agreeing hosts' output once, not fifteen times.
    assert result.output.count(f"sglang {SGLANG} at") == 2  # group A, and B's diff
    assert "[B] outlier: 1 host: gpu-09; differs from [A]:" in result.output
    events = load(path).events
    parts = [e for e in events if isinstance(e, ToolExecuted) and e.fleet == "cli_1"]
    assert sorted(e.host for e in parts) == sorted(fleet.hosts)
    raw = next(e for e in parts if e.host == fleet.drifts["version"])
    assert str(fleet.roots[fleet.drifts["version"]]) in raw.result.output  # raw, not masked
    start = events[0]
    assert isinstance(start, SessionStarted) and start.groups[GROUP] == fleet.hosts
    replayed = replay(path)
    assert replayed.ok, replayed.divergence
    today = fleet_ctx(settings)
    try:
        live = replay(path, live_ctx=today)  # each host's part run again, compared host by host
    finally:
        today.close()
    assert live.ok and sorted(c.host for c in live.calls) == sorted(fleet.hosts)


def test_the_playbook_names_exactly_the_planted_drifts_and_replays_exactly(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    ctx = fleet_ctx(settings)
    question = f"Which nodes of the {GROUP} pool differ from the others?"
    try:
        inv = start_investigation(question, PlaybookBrain(), ctx, settings, tmp_path)
        result = inv.run()
    finally:
        ctx.close()
    assert result.status == "answered"
    assert all(f.grounded for f in result.findings), [f for f in result.findings if not f.grounded]
    drifts = [f for f in result.findings if f.verdict == "no"]
    named = {_topic(f): _outlier_hosts(f) for f in drifts}
    assert len(drifts) == 3, [f.claim for f in drifts]  # no false difference
    assert named == {
        "versions": [fleet.drifts["version"]],
        "checkpoint": [fleet.drifts["checkpoint"]],
        "flags": [fleet.drifts["flag"]],
    }
    flag = next(f for f in drifts if _topic(f) == "flags")
    assert DRIFT_FLAG in flag.claim
    version = next(f for f in drifts if _topic(f) == "versions")
    assert DRIFT_SGLANG in version.claim and SGLANG in version.claim
    (lost,) = [f for f in result.findings if "unreachable" in f.claim]
    assert lost.claim.startswith(f"{fleet.unreachable} is unreachable")
    agree = [f for f in result.findings if f.verdict == "yes" and f is not lost]
    assert [_topic(f) for f in agree] == ["gpu"]  # no GPU on any host: the same answer
    again = replay(Path(result.transcript))
    assert again.ok, again.divergence
    rerun = replay(Path(result.transcript), brain=PlaybookBrain())
    assert rerun.ok, rerun.divergence


def _topic(finding: Finding) -> str:
    words = {"versions": "versions", "checkpoint": "checkpoint", "command lines": "flags"}
    return next((topic for word, topic in words.items() if word in finding.claim), "gpu")


def _outlier_hosts(finding: Finding) -> list[str]:
    """The hosts of the finding's quotes that are not the majority's (the smaller set)."""
    named = [expand(e.hosts) for e in finding.evidence if e.hosts]
    return sorted(min(named, key=len))


def test_a_quote_is_checked_against_the_named_hosts_own_output(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    ctx = fleet_ctx(settings)
    start = SessionStarted(
        session_id="t", question="q", hosts=describe_hosts(ctx), brain="test",
        groups=host_groups(ctx),
    )  # fmt: skip
    pipeline = CallPipeline(ctx, fleet=FleetView.of(start))
    try:
        pipeline.tool(Call("c1", "python_env", {"host": f"@{GROUP}"}), 1)
    finally:
        ctx.close()
    drifted, other = fleet.drifts["version"], fleet.reachable[0]
    line = f"sglang {DRIFT_SGLANG} at <root>/venv"

    def report(quote: str, hosts: list[str], claim: str = "sglang differs") -> bool:
        evidence = {"call_id": "c1", "quote": quote, "hosts": hosts}
        raw = {"claim": claim, "verdict": "no", "confidence": 0.9, "evidence": [evidence]}
        return pipeline.report(Call("r", "report_finding", raw), 2).quotes[0].grounded

    raw_path = str(fleet.roots[drifted])
    assert report(line, [drifted])  # as the grouped result shows it, masked
    assert report(f"sglang {DRIFT_SGLANG} at {raw_path}/venv", [drifted])  # as the host said
    assert not report(line, [other])  # another host's output does not hold it
    assert not report(line, [drifted, other])
    assert report(f"sglang {SGLANG} at <root>/venv", ["gpu-[01-04]"])
    assert not report(f"sglang {SGLANG} at <root>/venv", ["gpu-[08-10]"])  # gpu-09 drifted
    assert not report(line, ["gpu-99"])  # not a host of the call
    lost = "connection refused by 127.0.0.1"
    assert report(lost, [fleet.unreachable], "gpu-17 is unreachable")
    assert not report(lost, [fleet.unreachable], "gpu-17 runs sglang")  # says no failure


def test_at_most_the_concurrency_runs_at_once_and_a_late_host_is_reported(
    fleet: Fleet, settings: Settings
) -> None:
    settings.fleet.concurrency = 3
    ctx = fleet_ctx(settings)
    running, peak = 0, 0
    lock = threading.Lock()

    def counting(ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            return run_live(ctx, spec, args, call)
        finally:
            with lock:
                running -= 1

    start = SessionStarted(
        session_id="t", question="q", hosts=describe_hosts(ctx), brain="test",
        groups=host_groups(ctx),
    )  # fmt: skip
    try:
        pipeline = CallPipeline(ctx, executor=counting, fleet=FleetView.of(start))
        result = pipeline.tool(Call("c1", "gpu_info", {"host": f"@{GROUP}"}), 1)
        assert peak == 3 and grouped(result).hosts_of("all agree") == fleet.reachable
        settings.fleet.host_timeout_s = 0.001
        late = fleet_ctx(settings)
        pipeline = CallPipeline(late, fleet=FleetView.of(start))
        try:
            result = pipeline.tool(Call("c2", "python_env", {"host": f"@{GROUP}"}), 1)
        finally:
            late.close()
    finally:
        ctx.close()
    assert not result.ok and result.error_kind in ("timeout", "unreachable")
    timed_out = grouped(result).verdict_of("failed")
    assert timed_out and all(g.error_kind == "timeout" for g in timed_out)
    assert "host_timeout_s" in timed_out[0].output
    assert part_id("c2", fleet.reachable[0]) in pipeline.grounder.calls


def sleuth(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(fleet.home), "COLUMNS": "200"}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=fleet.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sleuth_tool_on_a_group_then_show_draws_the_groups_and_replay_says_same(
    fleet: Fleet, tmp_path: Path
) -> None:
    ran = sleuth(fleet, "tool", "server_processes", "--hosts", GROUP, "--json")
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    found = FleetResult.model_validate(out["data"])
    (outlier,) = found.verdict_of("outlier")
    assert outlier.hosts == [fleet.drifts["flag"]] and f"+  {DRIFT_FLAG}" in outlier.diff
    transcript = out["transcript"]
    md = sleuth(fleet, "show", transcript, "--format", "md")
    assert "| group | verdict | hosts | count | diff excerpt |" in md.stdout
    assert f"| B | outlier | {fleet.drifts['flag']} | 1 |" in md.stdout
    assert f"| U1 | unreachable | {fleet.unreachable} | 1 |" in md.stdout
    page = sleuth(fleet, "show", transcript, "--format", "html").stdout
    assert '<table class="fleet">' in page and f"<b>{fleet.drifts['flag']}</b>" in page
    text = sleuth(fleet, "show", transcript).stdout
    assert "outlier" in text and "17 raw per-host results recorded" in text
    replayed = sleuth(fleet, "replay", transcript)
    assert replayed.returncode == 0 and "SAME" in replayed.stdout, replayed.stdout


def test_an_unknown_group_is_a_usage_error_that_names_the_groups(fleet: Fleet) -> None:
    ran = sleuth(fleet, "tool", "python_env", "--hosts", "decode")
    assert ran.returncode == 2
    assert "unknown host or group 'decode'" in ran.stderr and "Groups: fleet" in ran.stderr


def test_a_mutating_tool_fans_out_only_under_a_rule_that_names_the_group(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    for name in fleet.hosts:
        settings.hosts[name].allow = ["stop_server"]
    stop = {"host": f"@{GROUP}", "server_id": "srv-20260101-000000-abcdef"}

    def run(call_id: str) -> tuple[ToolResult, list[Any]]:
        ctx = fleet_ctx(settings, approver=approver_for("yes"))
        events: list[Any] = []
        start = SessionStarted(
            session_id="t", question="q", hosts=describe_hosts(ctx), brain="test",
            groups=host_groups(ctx),
        )  # fmt: skip
        try:
            pipeline = CallPipeline(ctx, events.append, fleet=FleetView.of(start))
            return pipeline.tool(Call(call_id, "stop_server", stop), 1), events
        finally:
            ctx.close()

    refused, events = run("s1")
    assert refused.error_kind == "not_approved" and "[groups.fleet.approve]" in refused.error
    assert [e.type for e in events] == ["approval", "tool_executed"]  # no host was reached
    settings.groups[GROUP].approve.tools = ["stop_server"]
    fanned, events = run("s2")
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert {a.host for a in approvals} == {f"@{GROUP}", *fleet.hosts}
    assert all(
        a.approved and a.rule == "groups.fleet.approve.tools: stop_server" for a in approvals
    )
    parts = [e for e in events if isinstance(e, ToolExecuted) and e.fleet == "s2"]
    assert len(parts) == len(fleet.hosts) and grouped(fanned).hosts == fleet.hosts


def test_an_mcp_client_calls_a_group_and_cites_one_host(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    ctx = fleet_ctx(settings)
    session = McpSession.open(ctx, tmp_path, ClientInfo(name="test"))
    try:
        outcome = session.call("gpu_info", {"host": f"@{GROUP}"}, deny_all)
        assert not outcome.is_error and "[A] all agree: 16 hosts: gpu-[01-16]" in outcome.text
        evidence = {
            "call_id": outcome.call_id,
            "quote": "nvidia-smi is not installed",
            "hosts": ["gpu-[01-16]"],
        }
        raw = {"claim": "no GPU", "verdict": "no", "confidence": 0.9, "evidence": [evidence]}
        reported = session.call("report_finding", raw, deny_all)
        assert not reported.is_error, reported.text
    finally:
        session.end()
        ctx.close()
    replayed = replay(session.path)
    assert replayed.ok, replayed.divergence


def test_sleuth_ask_with_hosts_answers_offline(fleet: Fleet) -> None:
    asked = sleuth(fleet, "ask", "Do all hosts run the same sglang version?", "--hosts", GROUP,
                   "--fleet-concurrency", "4", "--json")  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert out["brain"] == "playbook" and out["status"] == "answered"
    claims = [f["claim"] for f in out["findings"]]
    assert any(c.startswith(f"{fleet.drifts['version']} differs") for c in claims), claims
    assert all(f["grounded"] for f in out["findings"])
