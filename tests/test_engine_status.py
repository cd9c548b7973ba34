"""engine_status against engines Sleuth did not start: recorded SGLang and vLLM documents
served byte for byte on 127.0.0.1, a prometheus_client page whose counters move at known
rates, and a plain subprocess an operator started with `--api-key`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from sleuth.tools.live.probe import PAGE_CAP, probe
from tests.live_servers import FIXTURES, Moving, Recorded, _Server

CANARY = "sk-live-canary-7f3a9c21d4e8b6"


def context(root: Path) -> ToolContext:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(root)]), Limits())
    return ToolContext(hosts={"local": host}, approver=deny_all)


def status(root: Path, **args: Any) -> tuple[dict[str, Any], str]:
    result = execute(context(root), "engine_status", {"host": "local", **args})
    assert result.ok, result.output
    return result.data, result.output


def figures(report: dict[str, Any], part: str = "now") -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in report[part]}


def test_sglang_metrics_page_read_as_sglang_with_each_figure_naming_its_series(
    tmp_path: Path,
) -> None:
    with Recorded({"/metrics": "sglang-metrics.txt"}) as server:
        data, output = status(tmp_path, port=server.port)
    (report,) = data["engines"]
    assert report["engine"] == "sglang"
    now = figures(report)
    assert now["kv_usage"]["value"] == 0.28
    assert now["kv_usage"]["series"] == ["sglang:token_usage"]
    assert now["running"]["value"] == 162 and now["waiting"]["value"] == 2826
    assert now["generation_tokens_since_launch"]["value"] == 7557572
    # No sglang:num_requests_total on this (older) page: requests come from the histogram.
    assert now["request_rate_since_launch"]["series"] == [
        "sglang:e2e_request_latency_seconds_count"
    ]
    assert now["request_rate_since_launch"]["value"] == 11228
    assert "kv_usage: 0.28 fraction [sglang:token_usage] now" in output


def test_vllm_0_10_page_uses_the_new_kv_name_and_never_mixes_prefix_cache_generations(
    tmp_path: Path,
) -> None:
    with Recorded({"/metrics": "vllm-0.10.0-metrics.txt"}) as server:
        data, _ = status(tmp_path, port=server.port)
    (report,) = data["engines"]
    assert report["engine"] == "vllm"
    now = figures(report)
    assert now["kv_usage"]["series"] == ["vllm:kv_cache_usage_perc"]
    assert now["kv_usage"]["value"] == pytest.approx(9.75010481363281e-06)
    # The excerpt has the new queries counter and the deprecated hits counter only: a hit
    # rate from those two would mix generations, so there is none.
    assert "prefix_cache_hit_rate_since_launch" not in now


def test_sglang_without_metrics_says_enable_metrics_and_reads_its_settings(
    tmp_path: Path,
) -> None:
    with Recorded({"/get_server_info": "sglang-server-info.json"}) as server:
        data, output = status(tmp_path, port=server.port)
    (report,) = data["engines"]
    assert report["engine"] == "sglang"
    assert report["metrics_available"] is False
    assert "--enable-metrics" in report["metrics_note"]
    (settings,) = report["settings"]
    assert settings["source"] == "/get_server_info"
    assert settings["values"]["chunked_prefill_size"] == 8192
    assert settings["values"]["api_key"] is None  # no key set: nothing to hide, said as is
    assert "engine_log_series" in output


def _with_key(name: str) -> bytes:
    doc = json.loads((FIXTURES / name).read_text())
    doc["server_args"]["api_key"] = CANARY
    doc["internal_states"] = [{"admin_api_key": CANARY, "avg_spec_accept_length": 2.9}]
    return json.dumps(doc).encode()


def test_api_key_in_server_info_is_redacted_on_the_host(tmp_path: Path) -> None:
    with Recorded({"/get_server_info": _with_key("sglang-server-info.json")}) as server:
        sandbox = context(tmp_path).host("local")
        answer, _ = probe(sandbox, [("127.0.0.1", server.port)])
        data, output = status(tmp_path, port=server.port)
    body = answer.targets[0].pages["/get_server_info"].body
    # What left the host program already had the key hidden, before Sleuth's own redaction.
    assert body["server_args"]["api_key"] == "[REDACTED:by-key api_key]"
    assert body["internal_states"][0]["admin_api_key"] == "[REDACTED:by-key api_key]"
    assert body["internal_states"][0]["avg_spec_accept_length"] == 2.9
    assert CANARY not in json.dumps(data) and CANARY not in output


def test_a_url_off_the_host_is_refused_without_connecting(tmp_path: Path) -> None:
    for url in ("http://10.255.255.1:8000", "http://example.com:80", "http://169.254.169.254"):
        data, output = status(tmp_path, url=url)
        (report,) = data["engines"]
        assert report["engine"] is None
        assert "not an address this host listens on" in report["problems"][0], output


def test_redirects_are_not_followed_and_bodies_are_capped(tmp_path: Path) -> None:
    big = b"# " + b"x" * (PAGE_CAP + 4096) + b"\n"
    with Recorded({"/metrics": big}) as target:

        def answer(path: str) -> tuple[int, bytes, str]:
            return 302, b"", "text/plain"

        with _Server(answer) as redirecting:
            sandbox = context(tmp_path).host("local")
            answer_, _ = probe(
                sandbox, [("127.0.0.1", redirecting.port), ("127.0.0.1", target.port)]
            )
            followed = list(target.paths)
    redirected, capped = answer_.targets
    assert redirected.pages["/v1/models"].status == 302
    assert followed == [
        "/v1/models",
        "/version",
        "/get_server_info",
        "/server_info",
        "/health",
        "/metrics",
    ]  # only the probe's own requests
    page = capped.pages["/metrics"]
    assert page.cut and page.text is not None and len(page.text.encode()) == PAGE_CAP


@pytest.fixture
def moving() -> Iterator[Moving]:
    with Moving() as server:
        time.sleep(0.3)
        yield server


def test_a_window_reports_rates_between_its_two_ends(tmp_path: Path, moving: Moving) -> None:
    data, output = status(tmp_path, port=moving.port, window_s=2.0)
    (report,) = data["engines"]
    assert report["engine"] == "vllm" and report["version"] == "0.10.1"
    assert report["max_model_len"] == {"Qwen/Qwen3-0.6B": 4096}
    window = figures(report, "window")
    served = [s for s in moving.served]
    (t0, g0, _), (t1, g1, _) = served[0], served[-1]
    assert window["generation_tokens_per_s"]["value"] == pytest.approx(
        (g1 - g0) / (t1 - t0), rel=0.03
    )
    assert window["generation_tokens_per_s"]["series"] == ["vllm:generation_tokens_total"]
    # Every draft of 4 tokens had 3 accepted: length 1 + 3 = 4, rate 3/4.
    assert window["spec_mean_accept_length"]["value"] == 4.0
    assert window["spec_acceptance_rate"]["value"] == 0.75
    assert window["kv_usage_max"]["value"] == max(kv for _, _, kv in served)
    assert len(served) >= 3  # sampled between the ends, for the gauges
    assert 1.9 <= report["window_s"] <= 2.6
    assert "spec_mean_accept_length: 4 tokens/step" in output


FAKE_VLLM = textwrap.dedent(
    """
    import json, os, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port = int(sys.argv[sys.argv.index("--port") + 1])
    metrics = open(os.environ["METRICS_PAGE"], "rb").read()
    models = json.dumps({"object": "list", "data": [{"id": "zai-org/GLM-4.5",
        "owned_by": "vllm", "max_model_len": 131072}]}).encode()
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"/metrics": metrics, "/v1/models": models}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"{}")
        def log_message(self, *a):
            pass
    HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def operator_vllm(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A server an operator started by hand: `python -m vllm.entrypoints.openai.api_server
    --port P --api-key KEY`, its module a stand-in serving the recorded vLLM page."""
    package = tmp_path / "pkgs" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(FAKE_VLLM)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "pkgs"),
        "METRICS_PAGE": str(FIXTURES / "vllm-0.10.0-metrics.txt"),
    }
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--port",
        str(port),
        "--api-key",
        CANARY,
    ]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield port, proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_an_operator_started_server_is_found_without_a_port_and_its_key_hidden(
    tmp_path: Path, operator_vllm: tuple[int, int]
) -> None:
    port, pid = operator_vllm
    data, output = status(tmp_path)
    mine = [r for r in data["engines"] if r["port"] == port]
    assert len(mine) == 1, output
    (report,) = mine
    assert report["engine"] == "vllm" and report["pid"] == pid
    assert report["max_model_len"] == {"zai-org/GLM-4.5": 131072}
    assert report["argv"][-2:] == ["--api-key", "[REDACTED:by-key api_key]"]
    assert CANARY not in json.dumps(data) and CANARY not in output


def test_over_ssh_the_pages_are_fetched_on_the_host_itself(
    tmp_path: Path, make_context: Any
) -> None:
    """The host program fetches on the host: the same answer over SSH as locally, and the
    key redacted before it crosses the connection."""
    pages = {
        "/metrics": "sglang-metrics.txt",
        "/get_server_info": _with_key("sglang-server-info.json"),
    }
    with Recorded(pages) as server:
        ctx = make_context([str(tmp_path)])
        remote = execute(ctx, "engine_status", {"host": "remote", "port": server.port})
        local = execute(ctx, "engine_status", {"host": "local", "port": server.port})
        answer, _ = probe(ctx.host("remote"), [("127.0.0.1", server.port)])
    assert remote.ok and local.ok, remote.output
    (there,), (here,) = remote.data["engines"], local.data["engines"]
    assert there["engine"] == "sglang" and there["now"] == here["now"]
    assert there["settings"] == here["settings"]
    body = answer.targets[0].pages["/get_server_info"].body
    assert body["server_args"]["api_key"] == "[REDACTED:by-key api_key]"
    assert CANARY not in json.dumps(remote.data) + remote.output
