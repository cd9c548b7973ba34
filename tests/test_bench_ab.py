"""`sleuth bench ab` against the synthetic server with known token timing: the calibration
in small (A/A trials call nothing different, a 3% slower per-token time is found with 5
repeats), the CLI and its schema, a relaunch of one server with two flag sets through
launch_server, and `bench compare` over stored runs that did and did not take turns.

The full 20-trial calibration is benchmarks/bench_ab.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from bench_support import SERVER, free_port, realtime_prefix, synthetic_server

from sleuth.agent.calls import Call, CallPipeline, execute
from sleuth.agent.session import CLI_CALL_ID, run_cli_call
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest, approver_for
from sleuth.tools.bench.ab_run import ABBenchmarkInput, ABResult, ABSide, run_ab
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ToolExecuted
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify

PROFILE = {"ttft_ms": 10, "itl_ms": 3.0}
SLOWER = {"ttft_ms": 10, "itl_ms": 3.09}  # 3% more time per token
LOAD = {"model": "m", "concurrency": [4], "num_prompts": 8, "output_len": 12, "input_len": 8}
# The calibration's runs: a run's p50 over 8 requests of 12 tokens moved by one late wake-up
# on a loaded box (1 in 6 trials missed the 3% with two busy loops beside it); 16 of 24 did
# not miss in 6.
CALIBRATION = {**LOAD, "num_prompts": 16, "output_len": 24}


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="test")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with synthetic_server({"m": PROFILE}) as a, synthetic_server({"m": SLOWER}) as b:
        yield a, b


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The load generator's interpreter, under chrt -f 10 where this machine allows it: the
    calibration measures the statistics, not how late a shared box wakes a process."""
    prefix = realtime_prefix()
    if not prefix:
        return sys.executable
    wrapper = tmp_path_factory.mktemp("rt") / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(prefix)} {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(wrapper)


def context(tmp: Path, allow: list[str]) -> ToolContext:
    config = HostConfig(roots=[str(tmp)], allow=allow)
    host = SandboxedHost("local", LocalHost("local"), config, Limits())
    return ToolContext(hosts={"local": host}, approver=approve, results_dir=tmp / "results")


def ab(
    tmp: Path, a: ABSide, b: ABSide, python: str, load: dict[str, Any] = LOAD, **extra: Any
) -> ABResult:
    args = ABBenchmarkInput(a=a, b=b, load={**load, "python": python, "warmup": 2}, **extra)
    ctx = context(tmp, ["run_benchmark", "launch_server", "stop_server"])
    ctx.subcall = lambda name, raw: execute(ctx, name, raw)
    result = run_ab(ctx, args)
    assert result.ok, result.error
    return ABResult.model_validate(result.data)


def verdicts(outcome: ABResult) -> dict[str, Any]:
    return {f"{m.metric} {m.stat}".strip(): m for m in outcome.analysis.metrics}


def test_a_a_calls_nothing_different_and_a_3_percent_slower_token_is_found(
    servers: tuple[str, str], tmp_path: Path, python: str
) -> None:
    a_url, b_url = servers
    same = [
        ab(tmp_path / f"aa{k}", ABSide(endpoint=a_url), ABSide(endpoint=a_url), python, CALIBRATION)
        for k in range(2)
    ]
    false_calls = [
        [m.sentence for m in o.analysis.metrics if m.verdict != "no detectable difference"]
        for o in same
    ]
    # Holm keeps the chance of any false call in a trial at 5%: of two trials, at most one
    # has any. Count trials, not calls: request and output throughput are one ratio here
    # (every request streams the same tokens), so one chance difference is called twice.
    assert sum(bool(calls) for calls in false_calls) <= 1, false_calls
    outcome = ab(
        tmp_path / "ab", ABSide(endpoint=a_url), ABSide(endpoint=b_url), python, CALIBRATION
    )
    found = verdicts(outcome)
    assert outcome.analysis.order == "ABBAABBAAB" and outcome.analysis.interleaved
    for name in ("tpot p50", "itl p50"):
        assert found[name].verdict == "slower", found[name].sentence
        assert found[name].change == pytest.approx(0.03, abs=0.01)
        assert found[name].ci_low > 0
    assert found["ttft p50"].verdict != "faster"
    assert len(outcome.runs) == 10 and [r.side for r in outcome.runs[:4]] == ["A", "B", "B", "A"]
    assert len({r.seed for r in outcome.runs}) == 10  # no run re-sends another's prompts
    saved = json.loads((Path(outcome.folder) / "ab.json").read_text())
    assert saved["analysis"] == outcome.analysis.model_dump(mode="json")


def launch(port: int, itl_ms: float) -> dict[str, Any]:
    """launch_server inputs for the synthetic server as a custom-command engine (under chrt
    where allowed: a server woken late by a busy machine would blur the two flag sets)."""
    argv = [*realtime_prefix(), sys.executable, str(SERVER), "--port", str(port)]
    argv += ["--itl-ms", str(itl_ms), "--model", "m"]
    return {
        "engine": "command",
        "command": argv,
        "ready_url": f"http://127.0.0.1:{port}/health",
        "port": port,
        "timeout_s": 30,
        "poll_s": 0.1,
    }


def test_one_server_relaunched_with_two_flag_sets_through_launch_server(
    tmp_path: Path, python: str
) -> None:
    port = free_port()
    outcome = ab(
        tmp_path,
        ABSide(launch=launch(port, 10.0), label="itl-10"),
        ABSide(launch=launch(port, 11.0), label="itl-11"),
        python,
        repeats=2,
    )
    # A B B A: B's two runs share one launch, each A run has its own.
    ids = [r.server_id for r in outcome.runs]
    assert [r.side for r in outcome.runs] == ["A", "B", "B", "A"]
    assert ids[1] == ids[2] and len({ids[0], ids[1], ids[3]}) == 3
    assert verdicts(outcome)["tpot p50"].change == pytest.approx(0.10, abs=0.03)
    ctx = context(tmp_path, ["launch_server", "stop_server"])
    for server_id in set(ids):
        status = execute(ctx, "server_status", {"server_id": server_id})
        assert status.ok and not status.data["alive"], status.output


def test_relaunch_refused_without_permission_runs_nothing(tmp_path: Path, python: str) -> None:
    port = free_port()
    args = ABBenchmarkInput(
        a=ABSide(launch=launch(port, 3.0)),
        b=ABSide(launch=launch(port, 3.3)),
        load={**LOAD, "python": python},
    )
    result = execute(
        context(tmp_path, ["run_benchmark", "ab_benchmark"]),
        "ab_benchmark",
        {
            **args.model_dump(),
        },
    )
    assert not result.ok and "launch_server" in (result.error or "")
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("*.jsonl"))


def sleuth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    argv = [sys.executable, "-m", "sleuth.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=300, env=env)


def test_cli_json_matches_its_schema_and_compare_recomputes_it_from_the_records(
    servers: tuple[str, str], tmp_path: Path, python: str
) -> None:
    a_url, b_url = servers
    load = ["-m", "m", "-c", "4", "-n", "8", "--output-len", "12", "--input-len", "8"]
    done = sleuth(
        "bench",
        "ab",
        a_url,
        b_url,
        *load,
        "--repeats",
        "3",
        "--python",
        python,
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    schema = json.loads(sleuth("schema", "bench-ab", cwd=tmp_path).stdout)
    jsonschema.validate(data, schema)
    assert data["analysis"]["pairs"] == 3 and data["transcript"]
    assert {Path(p).name for p in data["plots"]} == {"ab-intervals.png", "ab-cdf.png"}
    assert all(Path(p).read_bytes()[:4] == b"\x89PNG" for p in data["plots"])
    folder = Path(data["folder"])
    again = sleuth("bench", "compare", str(folder / "A"), str(folder / "B"), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["interleaved"] is True and report["repeats"][0]["order"] == "ABBAAB"
    recomputed = {(m["metric"], m["stat"]): m["change"] for m in report["repeats"][0]["metrics"]}
    recorded = {(m["metric"], m["stat"]): m["change"] for m in data["analysis"]["metrics"]}
    assert recomputed == pytest.approx(recorded)
    table = sleuth(
        "bench", "ab", a_url, b_url, *load, "--repeats", "2", "--python", python, cwd=tmp_path
    )
    assert table.returncode == 0, table.stderr
    assert "tpot p50 (ms)" in table.stdout and "order ABBA" not in table.stderr


def test_compare_says_plainly_when_runs_did_not_take_turns(
    servers: tuple[str, str], tmp_path: Path, python: str
) -> None:
    a_url, b_url = servers
    load = ["-m", "m", "-c", "4", "-n", "8", "--output-len", "12", "--python", python]
    for side, url in (("a", a_url), ("a", a_url), ("b", b_url), ("b", b_url)):
        done = sleuth("bench", url, *load, "--out-dir", side, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    report = sleuth("bench", "compare", "a", "b", "--json", cwd=tmp_path)
    data = json.loads(report.stdout)
    assert data["interleaved"] is False and data["repeats"][0]["order"] == "AABB"
    assert data["summary"].startswith("phase 0: NOT INTERLEAVED, drift confounded")
    one = sorted((tmp_path / "a").glob("*.jsonl"))[0], sorted((tmp_path / "b").glob("*.jsonl"))[0]
    single = json.loads(sleuth("bench", "compare", *map(str, one), "--json", cwd=tmp_path).stdout)
    assert single["interleaved"] is False
    assert any("not interleaved" in w for w in single["warnings"])


def test_without_matplotlib_the_verdicts_come_and_the_plots_are_named_as_skipped(
    servers: tuple[str, str], tmp_path: Path, python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from sleuth.cli import app, bench_args

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench_args, "pyplot", lambda: None)
    a_url, _ = servers
    load = ["-m", "m", "-c", "4", "-n", "8", "--output-len", "12", "--python", python]
    done = CliRunner().invoke(app, ["bench", "ab", a_url, a_url, *load, "--repeats", "2"])
    assert done.exit_code == 0, done.output
    assert "matplotlib is not installed, so the A/B plots are skipped" in done.output
    assert "pip install 'sleuth[plot]'" in done.output and "plot:" not in done.output
    assert "no detectable difference" in done.output
    refused = CliRunner().invoke(app, ["bench", a_url, *load, "--plot", "x.png"])
    assert refused.exit_code == 2 and "--plot needs matplotlib" in refused.output


def test_a_relaunch_inside_ab_benchmark_needs_consent_like_any_launch(tmp_path: Path) -> None:
    """ab_benchmark approved by --yes does not carry its launches: each is a call of its own
    through the pipeline, and a custom command no rule matches is refused and recorded."""
    events: list[Any] = []
    ctx = context(tmp_path, ["run_benchmark", "launch_server", "stop_server", "ab_benchmark"])
    ctx.approver = approver_for("yes")
    pipeline = CallPipeline(ctx, events.append)
    port = free_port()
    # No `python` in the load: --yes would refuse that before any launch (it is decided as
    # run_benchmark's own, tests/adversarial/test_model_programs.py); the launch is at stake.
    load = {**LOAD, "warmup": 2}
    raw = {
        "a": {"launch": launch(port, 10.0), "label": "a"},
        "b": {"launch": launch(port, 11.0), "label": "b"},
        "load": load,
        "repeats": 2,
    }
    result = pipeline.tool(Call("toolu_ab", "ab_benchmark", raw), 1)
    assert not result.ok
    assert "launch_server" in (result.error or "") and "not approved" in (result.error or "")
    refusals = [e for e in events if e.type == "approval" and not e.approved]
    assert [(e.call_id, e.tool) for e in refusals] == [("toolu_ab.1", "launch_server")]


def test_the_cli_path_records_each_relaunch_as_a_call_of_its_own(
    tmp_path: Path, python: str
) -> None:
    """`sleuth bench ab` runs ab_benchmark itself (its request headers are no input): its
    relaunches still ask consent and land in its transcript as parts of the call, before it."""
    port = free_port()
    args = ABBenchmarkInput(
        a=ABSide(launch=launch(port, 3.0), label="a"),
        b=ABSide(launch=launch(port, 3.3), label="b"),
        load={**LOAD, "python": python, "warmup": 1},
        repeats=2,
    )
    ctx = context(tmp_path, ["run_benchmark", "launch_server", "stop_server"])
    asked: list[str] = []
    ctx.on_approval = lambda request, decision: asked.append(request.tool)
    result, path = run_cli_call(
        tmp_path / "t",
        ctx,
        "ab_benchmark",
        args.model_dump(mode="json"),
        lambda run_ctx: run_ab(run_ctx, args, {}),
    )
    ctx.close()
    assert result.ok, result.error
    events = load(path).events
    calls = [(e.call_id, e.tool) for e in events if isinstance(e, ToolExecuted)]
    assert calls[-1] == (CLI_CALL_ID, "ab_benchmark")
    parts = calls[:-1]
    assert {tool for _, tool in parts} == {"launch_server", "stop_server"}
    assert [cid for cid, _ in parts] == [f"{CLI_CALL_ID}.{n}" for n in range(1, len(parts) + 1)]
    launches = sum(tool == "launch_server" for _, tool in parts)
    # A B B A: B's two runs share one launch.
    assert launches == 3 and asked.count("launch_server") == launches
    assert verify(path).ok
