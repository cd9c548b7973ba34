"""query_metrics against a real Prometheus (Debian's package) scraping a /metrics page every
second: the tool's PromQL, pasted into Prometheus's own HTTP API at the same time, gives the
same numbers; ranges are capped and say so; the bearer token goes only to Prometheus."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits, PrometheusSettings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from tests.live_servers import Moving, _Server
from tests.prometheus_server import PrometheusServer, missing_reason

TOKEN = "prom-canary-token-5d1e9b"


def ask(root: Path, settings: PrometheusSettings, **args: Any) -> tuple[dict[str, Any], str]:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(root)]), Limits())
    ctx = ToolContext(hosts={"local": host}, approver=deny_all, prometheus=settings)
    result = execute(ctx, "query_metrics", {"host": "local", **args})
    assert result.ok, result.output
    return result.data, result.output


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Moving, PrometheusServer]]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with Moving(tick=0.1) as engine:
        prom = PrometheusServer(tmp_path_factory.mktemp("prom"), [f"127.0.0.1:{engine.port}"])
        try:
            prom.wait_for_samples("vllm:generation_tokens_total", 5)
            yield engine, prom
        finally:
            prom.close()


def direct(prom: PrometheusServer, promql: str, at: float) -> list[float]:
    doc = prom.query(promql, at)
    assert doc["status"] == "success"
    return [float(r["value"][1]) for r in doc["data"]["result"]]


@pytest.mark.parametrize("question", ["request_rate", "ttft_p50", "ttft_p99", "acceptance_length"])
def test_named_questions_give_what_prometheus_gives_for_the_same_promql(
    tmp_path: Path, scraped: tuple[Moving, PrometheusServer], question: str
) -> None:
    _, prom = scraped
    data, output = ask(tmp_path, PrometheusSettings(url=prom.url), question=question, range_s=30)
    assert data["engine"] == "vllm"
    assert f"PromQL: {data['promql']}" in output
    values = [r["value"] for r in data["rows"]]
    assert values and values == direct(prom, data["promql"], data["at"])
    assert data["rows"][0]["labels"] == {"model_name": "Qwen/Qwen3-0.6B"}
    if question == "request_rate":
        assert "rate(vllm:request_success_total[30s])" in data["promql"]
        assert values[0] > 0
    if question == "acceptance_length":
        # Every draft of 4 tokens had 3 accepted. Approximate: PromQL divides two
        # extrapolated rates, and (3nf)/(nf) is not always 3.0 in floating point.
        assert values == [pytest.approx(4.0, rel=1e-9)]
    if question.startswith("ttft"):
        assert "vllm:time_to_first_token_seconds_bucket" in data["promql"]


def test_raw_range_is_capped_in_points_and_says_so(
    tmp_path: Path, scraped: tuple[Moving, PrometheusServer]
) -> None:
    _, prom = scraped
    settings = PrometheusSettings(url=prom.url, max_points=10)
    data, output = ask(tmp_path, settings, promql="vllm:kv_cache_usage_perc", range_s=60, step_s=1)
    assert data["step_s"] == 7  # ceil(60 / 9): ten points over the minute
    assert all(r["points"] <= 10 for r in data["rows"])
    assert "cap: step raised from 1 s to 7 s to stay within 10 points per series" in output


def test_a_question_without_its_series_says_which_it_needs(
    tmp_path: Path, scraped: tuple[Moving, PrometheusServer]
) -> None:
    _, prom = scraped
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(tmp_path)]), Limits())
    ctx = ToolContext(
        hosts={"local": host}, approver=deny_all, prometheus=PrometheusSettings(url=prom.url)
    )
    result = execute(ctx, "query_metrics", {"question": "preemptions"})
    assert not result.ok and "vllm:num_preemptions_total" in (result.error or "")


def test_no_prometheus_configured_says_how_to_set_it(tmp_path: Path) -> None:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(tmp_path)]), Limits())
    ctx = ToolContext(hosts={"local": host}, approver=deny_all)
    result = execute(ctx, "query_metrics", {"question": "request_rate"})
    assert not result.ok and result.error_kind == "config"
    assert "[prometheus]" in (result.error or "")


def test_the_token_goes_to_prometheus_only_and_never_into_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [{"metric": {"model_name": "m"}, "value": [1.0, "2.5"]}],
            },
        }
    ).encode()
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    with (
        _Server(lambda path: (200, answer, "application/json")) as prom,
        _Server(lambda path: (200, answer, "application/json")) as elsewhere,
    ):
        moved = f"http://127.0.0.1:{elsewhere.port}/api/v1/query"
        with _Server(lambda path: (302, b"", "text/plain", {"Location": moved})) as redirecting:
            data, output = ask(
                tmp_path,
                PrometheusSettings(url=f"http://127.0.0.1:{prom.port}", token_env="PROM_TOKEN"),
                promql="up",
            )
            host = SandboxedHost(
                "local", LocalHost("local"), HostConfig(roots=[str(tmp_path)]), Limits()
            )
            settings = PrometheusSettings(
                url=f"http://127.0.0.1:{redirecting.port}", token_env="PROM_TOKEN"
            )
            ctx = ToolContext(hosts={"local": host}, approver=deny_all, prometheus=settings)
            refused = execute(ctx, "query_metrics", {"promql": "up"})
    assert data["rows"][0]["value"] == 2.5
    assert prom.authorizations == [f"Bearer {TOKEN}"]
    assert redirecting.authorizations == [f"Bearer {TOKEN}"]
    assert not refused.ok and elsewhere.paths == []  # the redirect was not followed
    assert TOKEN not in json.dumps(data) + output + json.dumps(refused.model_dump(mode="json"))


def test_bad_label_names_are_refused_as_input(tmp_path: Path) -> None:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(tmp_path)]), Limits())
    settings = PrometheusSettings(url="http://127.0.0.1:9")
    ctx = ToolContext(hosts={"local": host}, approver=deny_all, prometheus=settings)
    for bad in ({"labels": {'x"}) or vector(1': "1"}}, {"by": ["a b"]}):
        result = execute(ctx, "query_metrics", {"question": "request_rate", **bad})
        assert not result.ok and result.error_kind == "invalid_input", result.error
