"""The playbook's live family: questions about a running server answered with findings that
quote engine_status's figure lines, against a /metrics page moving at known rates and a
recorded SGLang server without metrics."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.agent.loop import RunResult
from sleuth.agent.playbook.brain import PlaybookBrain
from sleuth.agent.playbook.plan import Question
from sleuth.agent.playbook.registry import route
from sleuth.agent.session import start_investigation
from sleuth.config import HostConfig, Limits, PrometheusSettings, Settings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests.live_servers import Moving, Recorded
from tests.prometheus_server import PrometheusServer, missing_reason


def investigate(root: Path, question: str, prometheus: str | None = None) -> RunResult:
    sandbox = SandboxedHost("local", LocalHost(), HostConfig(roots=[str(root)]), Limits())
    ctx = ToolContext(hosts={"local": sandbox}, prometheus=PrometheusSettings(url=prometheus))
    settings = Settings(hosts={"local": sandbox.config})
    return start_investigation(question, PlaybookBrain(), ctx, settings, root / "t").run()


@pytest.fixture
def moving() -> Iterator[Moving]:
    with Moving() as server:
        time.sleep(0.3)
        yield server


def test_questions_about_a_running_server_route_to_live() -> None:
    hosts = {"local": ["/srv"]}
    for text in (
        "Is speculative decoding working on the server at :30000, and what is its acceptance "
        "over the last 5 minutes?",
        "Why is TTFT high right now?",
    ):
        assert route(Question(text, hosts)) == "live", text
    assert route(Question("serve /srv/models/x with sglang and report ttft", hosts)) == "serve"


def test_is_speculative_decoding_working_quotes_the_window_figures(
    tmp_path: Path, moving: Moving
) -> None:
    result = investigate(
        tmp_path,
        f"Is speculative decoding working on the server at :{moving.port}, and what is its "
        "acceptance over the last 5 minutes?",
    )
    assert result.status == "answered"
    first = result.findings[0]
    assert first.verdict == "yes" and first.grounded
    assert "mean acceptance length 4.00 tokens per verify step" in first.claim
    assert "draft acceptance rate 0.75" in first.claim
    quoted = " ".join(e.quote for e in first.evidence)
    assert (
        "spec_mean_accept_length: 4 tokens/step [vllm:spec_decode_num_accepted_tokens_total"
        in quoted
    )


def test_why_is_ttft_high_names_the_queue_and_the_kv_pool(tmp_path: Path) -> None:
    with Moving(kv=0.95) as moving:
        result = investigate(
            tmp_path, f"Why is TTFT high on the server at :{moving.port} over the last 3 seconds?"
        )
    first = result.findings[0]
    assert first.verdict == "yes" and first.grounded, first
    # The queue steps 1, 2, 3: every sample of it shows requests waiting.
    assert re.search(r"requests queue \(up to [123] waiting\)", first.claim)
    assert "the KV pool is 95% full at its peak" in first.claim
    quoted = " ".join(e.quote for e in first.evidence)
    assert re.search(r"waiting_max: [123] requests \[vllm:num_requests_waiting\]", quoted)


def test_sglang_without_metrics_says_so_and_points_at_its_log(tmp_path: Path) -> None:
    with Recorded({"/get_server_info": "sglang-server-info.json"}) as server:
        result = investigate(
            tmp_path, f"Is speculative decoding working on the server at :{server.port}?"
        )
    first = result.findings[0]
    assert first.verdict == "unknown" and first.grounded
    assert "--enable-metrics" in first.claim
    assert any("engine_log_series" in step for step in first.next_steps)


def test_with_prometheus_the_acceptance_over_the_minutes_asked_is_quoted_with_its_promql(
    tmp_path: Path, moving: Moving
) -> None:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    prom = PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{moving.port}"])
    try:
        prom.wait_for_samples("vllm:spec_decode_num_drafts_total", 4)
        result = investigate(
            tmp_path,
            f"What is the acceptance on the server at :{moving.port} over the last 2 minutes? "
            "Is speculative decoding working?",
            prometheus=prom.url,
        )
    finally:
        prom.close()
    history = [f for f in result.findings if f.claim.startswith("Prometheus over the last 2 min")]
    assert [f.grounded for f in history] == [True, True], result.findings
    length = next(f for f in history if "acceptance_length" in f.claim)
    assert "Qwen/Qwen3-0.6B 4 (tokens/step)" in length.claim
    assert (
        "PromQL: 1 + sum by (model_name) (rate(vllm:spec_decode_num_accepted_tokens_total[120s]))"
        in length.claim
    )
