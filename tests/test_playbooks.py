"""The offline playbook: each question family on fixtures, locally and over the test sshd."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.loop import RunResult
from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.playbook.plan import Question
from sleuth.agent.playbook.registry import route
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Limits, Settings
from sleuth.demo_deployment import build_demo
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.transcripts.events import ApprovalEvent, ToolExecuted
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify

SERVER = Path(__file__).with_name("streaming_server.py")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deploy")
    build_demo(root)
    srt = root / "src" / "sglang" / "python" / "sglang" / "srt"
    (srt / "models").mkdir(parents=True)
    (srt / "models" / "qwen3_5_mtp.py").write_text(
        "import torch\n\n\nclass Qwen3_5MoeForCausalLMMTP(torch.nn.Module):\n    pass\n"
    )
    (srt / "server_args.py").write_text(
        "def add_cli_args(parser):\n"
        "    parser.add_argument(\n"
        '        "--speculative-algorithm",\n'
        '        choices=["EAGLE", "EAGLE3", "NEXTN"],\n'
        "    )\n"
    )
    return root


@pytest.fixture(params=["local", "remote"])
def ctx(request: pytest.FixtureRequest, deployment: Path) -> ToolContext:
    if request.param == "local":
        sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(deployment)]), Limits())
        return ToolContext(hosts={"local": sandbox})
    made: ToolContext = request.getfixturevalue("make_context")([str(deployment)])
    return made


def investigate(ctx: ToolContext, question: str, tmp_path: Path) -> RunResult:
    settings = Settings(hosts={name: s.config for name, s in ctx.hosts.items()})
    inv = start_investigation(question, PlaybookBrain(), ctx, settings, tmp_path)
    return inv.run()


def calls(result: RunResult) -> list[ToolExecuted]:
    events = load(Path(result.transcript)).events
    return [e for e in events if isinstance(e, ToolExecuted) and e.tool != "report_finding"]


def test_mtp_heads_present_are_reported_with_grounded_evidence(
    ctx: ToolContext, tmp_path: Path
) -> None:
    result = investigate(
        ctx, "Did the NVFP4 export of Qwen3.5-MoE-demo-NVFP4 keep its MTP heads?", tmp_path
    )
    assert result.status == "answered"
    mtp = result.findings[0]
    assert mtp.verdict == "yes" and mtp.grounded
    assert "203 MTP tensors" in mtp.claim
    host = "remote" if "remote" in ctx.hosts else "local"
    assert {c.host for c in calls(result)} == {host}
    assert verify(Path(result.transcript)).ok


def test_the_trap_declared_but_stripped_is_caught(ctx: ToolContext, tmp_path: Path) -> None:
    result = investigate(ctx, "Does DeepSeek-V3-demo-FP8 still carry its MTP heads?", tmp_path)
    (finding,) = [f for f in result.findings if "DeepSeek" in f.claim]
    assert finding.verdict == "no" and finding.grounded
    assert any("WARNING: config declares 1 MTP layer(s)" in e.quote for e in finding.evidence)


def test_mtp_family_greps_the_engine_source_when_named(
    ctx: ToolContext, deployment: Path, tmp_path: Path
) -> None:
    question = (
        f"Does {deployment}/models/Qwen3.5-MoE-demo-NVFP4 keep its MTP heads, and does "
        f"the engine at {deployment}/src/sglang have an MTP model?"
    )
    result = investigate(ctx, question, tmp_path)
    engine = [f for f in result.findings if "src/sglang" in f.claim]
    assert engine and engine[0].verdict == "yes" and engine[0].grounded
    assert any("Qwen3_5MoeForCausalLMMTP" in e.quote for e in engine[0].evidence)


def test_quantisation_names_method_exclusions_and_dtypes(ctx: ToolContext, tmp_path: Path) -> None:
    result = investigate(ctx, "What is Qwen3.5-MoE-demo-NVFP4 quantised to?", tmp_path)
    (finding,) = result.findings
    assert finding.grounded and finding.verdict == "yes"
    assert "NVFP4" in finding.claim and "group size 16" in finding.claim
    assert "lm_head" in finding.claim and "U8×7680" in finding.claim


def test_architecture_counts_layers_experts_and_parameters(
    ctx: ToolContext, tmp_path: Path
) -> None:
    result = investigate(ctx, "Summarise the architecture of DeepSeek-V3-demo-FP8", tmp_path)
    (finding,) = result.findings
    assert finding.grounded
    assert "num hidden layers 12" in finding.claim and "num experts 32" in finding.claim
    assert "parameters counted from the headers" in finding.claim


@pytest.mark.parametrize(
    "question", ["What is {} quantised to?", "Summarise the architecture of {}"]
)
def test_a_checkpoint_that_cannot_be_read_is_said_to_be_unread(
    question: str, tmp_path: Path
) -> None:
    folder = tmp_path / "models" / "half-copied"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("weights still uploading\n")  # no config.json, no shards
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(tmp_path)]), Limits())
    result = investigate(ToolContext(hosts={"local": sandbox}), question.format(folder), tmp_path)
    (finding,) = result.findings
    (summary,) = [c for c in calls(result) if c.tool == "checkpoint_summary"]
    assert not summary.result.ok
    assert finding.verdict == "unknown" and finding.grounded, finding.claim
    assert "could not be read" in finding.claim and str(folder) in finding.claim
    assert "declares no quantisation" not in finding.claim


def test_engine_support_for_a_flag_lists_files_and_lines(
    ctx: ToolContext, deployment: Path, tmp_path: Path
) -> None:
    result = investigate(ctx, f"Which flag turns on NEXTN in {deployment}/src/sglang?", tmp_path)
    (finding,) = result.findings
    assert finding.verdict == "yes" and finding.grounded
    assert "server_args.py" in finding.claim
    grep = next(c for c in calls(result) if c.tool == "grep")
    assert "server_args.py:4:" in grep.result.output


def test_a_quoted_hyphenated_feature_finds_its_underscored_spelling_too(tmp_path: Path) -> None:
    srt = tmp_path / "src" / "sglang" / "python" / "sglang" / "srt"
    srt.mkdir(parents=True)
    (srt / "server_args.py").write_text(
        "class ServerArgs:\n"
        "    speculative_algorithm: str | None = None\n\n"
        "def add_cli_args(parser):\n"
        '    parser.add_argument("--speculative-algorithm", choices=["EAGLE", "NEXTN"])\n'
    )
    (srt / "spec_info.py").write_text(
        'def is_nextn(server_args):\n    return server_args.speculative_algorithm == "NEXTN"\n'
    )
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(tmp_path)]), Limits())
    question = f"Which engine flag enables 'speculative-algorithm' in {tmp_path}/src/sglang?"
    result = investigate(ToolContext(hosts={"local": sandbox}), question, tmp_path / "t")
    (finding,) = result.findings
    assert finding.verdict == "yes" and finding.grounded, finding.claim
    assert "3 line(s) across 2 file(s)" in finding.claim
    assert any("speculative_algorithm" in e.quote for e in finding.evidence)


def test_environment_without_gpu_is_an_answer(ctx: ToolContext, tmp_path: Path) -> None:
    result = investigate(ctx, "Which GPUs and engine versions are installed?", tmp_path)
    assert result.status == "answered"
    gpu = next(f for f in result.findings if "GPU" in f.claim)
    assert gpu.grounded and gpu.verdict == "no"
    assert all(c.result.ok for c in calls(result))


def test_an_unroutable_question_lists_the_families(tmp_path: Path, deployment: Path) -> None:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(deployment)]), Limits())
    result = investigate(
        ToolContext(hosts={"local": sandbox}), "Is the moon made of cheese?", tmp_path
    )
    assert result.status == "unsupported" and not result.findings  # no grounded finding
    assert "cannot route" in result.answer and "ANTHROPIC_API_KEY" in result.answer
    assert "MTP heads" in result.answer and "serve and benchmark" in result.answer
    assert not calls(result)


@pytest.mark.parametrize(
    "text,family",
    [
        ("Did the NVFP4 quantisation keep the model's MTP heads?", "mtp"),
        ("Which flag turns them on in this SGLang build?", "engine"),
        ("What throughput do we get with speculative decoding on?", "serve"),
        ("How many experts does /models/X have?", "arch"),
        ("Is it FP8 or NVFP4?", "quant"),
        ("Which vllm version is installed?", "env"),
        ("Tell me a joke", None),
    ],
)
def test_routing_by_words(text: str, family: str | None) -> None:
    assert route(Question(text, {"local": ["/"]})) == family


STAND_IN = """#!/bin/sh
# Stands in for python3: `-m sglang.launch_server ...` serves the synthetic engine instead;
# anything else (launch_server's preflight probe) sees an installed SGLang's files.
if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then
  port=
  while [ $# -gt 0 ]; do if [ "$1" = --port ]; then port=$2; fi; shift; done
  exec {python} {server} --port "$port" --ttft-ms 20 --itl-ms 2 --ready-line
fi
PYTHONPATH={site} exec {python} "$@"
"""


def installed_sglang(root: Path) -> Path:
    """A site folder where SGLang looks installed: its package, entry point and metadata."""
    site = root / "site"
    for rel in ("sglang/__init__.py", "sglang/launch_server.py", "sgl_kernel/__init__.py"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("")
    for name in ("sglang", "sgl_kernel"):
        meta = site / f"{name}-0.5.5.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.5.5\n")
    return site


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize("approved", [True, False])
def test_serve_and_benchmark_runs_only_with_permission(
    deployment: Path, tmp_path: Path, approved: bool
) -> None:
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    site = installed_sglang(tmp_path)
    python.write_text(STAND_IN.format(python=sys.executable, server=SERVER, site=site))
    python.chmod(0o755)
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(approved=approved, by="test", reason="" if approved else "no")

    config = HostConfig(
        roots=[str(deployment)],
        python=str(python),
        allow=["launch_server", "stop_server", "run_benchmark"],
    )
    ctx = ToolContext(
        hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())},
        approver=approver,
        results_dir=tmp_path / "results",  # not the checkout's bench-results/
    )
    port = free_port()
    question = (
        f"Serve {deployment}/models/Qwen3.5-MoE-demo-NVFP4 on port {port} and benchmark "
        "it at concurrency 2"
    )
    result = investigate(ctx, question, tmp_path)
    events = load(Path(result.transcript)).events
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approvals and all(a.approved == approved for a in approvals)
    (finding,) = result.findings
    if approved:
        assert [a.tool for a in approvals] == ["launch_server", "run_benchmark", "stop_server"]
        assert finding.verdict == "yes" and finding.grounded
        assert "throughput" in finding.claim.lower()
    else:
        assert [a.tool for a in approvals] == ["launch_server"]
        # A claim about the refusal, quoting it: grounded, though the call failed.
        assert finding.verdict == "unknown" and finding.grounded, finding.claim
        assert "launch_server on 'local' was not approved: no" in finding.claim
        assert [e.call_id for e in finding.evidence] == [approvals[0].call_id]
    with socket.socket() as sock:  # nothing is left listening
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_demo_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_BASE_URL")}
    proc = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "demo", "--dir", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert all(out["checks"].values()) and len(out["checks"]) == 5  # replay --live too
    verdicts = [[f["verdict"] for f in inv["findings"]] for inv in out["investigations"]]
    assert verdicts[0] == ["no"] and verdicts[1][0] == "yes" and verdicts[2] == ["yes"]
    for inv in out["investigations"]:
        assert verify(Path(inv["transcript"])).ok
        assert all(f["grounded"] for f in inv["findings"])


AB_STAND_IN = """#!/bin/sh
# Stands in for python3: `-m sglang.launch_server ...` serves the synthetic engine, twice as
# fast per token when speculative decoding is asked for.
if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then
  port=; itl=8
  while [ $# -gt 0 ]; do
    case "$1" in --port) port=$2;; --speculative-algorithm) itl=4;; esac
    shift
  done
  exec {python} {server} --port "$port" --ttft-ms 20 --itl-ms "$itl" --ready-line
fi
PYTHONPATH={site} exec {python} "$@"
"""


def test_speculative_decoding_gain_is_measured_without_and_with_and_compared(
    deployment: Path, tmp_path: Path
) -> None:
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    site = installed_sglang(tmp_path)
    python.write_text(AB_STAND_IN.format(python=sys.executable, server=SERVER, site=site))
    python.chmod(0o755)
    config = HostConfig(
        roots=[str(deployment)],
        python=str(python),
        allow=["launch_server", "stop_server", "run_benchmark"],
    )
    ctx = ToolContext(
        hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())},
        approver=lambda r: ApprovalDecision(approved=True, by="test"),
        results_dir=tmp_path / "results",
    )
    port = free_port()
    question = (
        f"What do we gain with speculative decoding on when serving "
        f"{deployment}/models/Qwen3.5-MoE-demo-NVFP4 on port {port} at concurrency 2?"
    )
    result = investigate(ctx, question, tmp_path)
    tools = [c.tool for c in calls(result)]
    assert tools == [
        "launch_server",
        "run_benchmark",
        "stop_server",
        "launch_server",
        "run_benchmark",
        "stop_server",
        "compare_benchmarks",
    ]
    launches = [c for c in calls(result) if c.tool == "launch_server"]
    assert "speculative" not in launches[0].input
    assert launches[1].input["speculative"] == {"algorithm": "NEXTN"}
    (finding,) = result.findings
    assert finding.verdict == "yes" and finding.grounded, finding
    assert "TPOT p50 is" in finding.claim and "lower" in finding.claim
    compared = next(c for c in calls(result) if c.tool == "compare_benchmarks")
    tpot = next(
        m
        for m in compared.result.data["phases"][0]["metrics"]
        if (m["metric"], m["stat"]) == ("tpot", "p50")
    )
    assert tpot["significant"] and tpot["rel_diff"] == pytest.approx(-0.5, abs=0.1)
    assert verify(Path(result.transcript)).ok
