"""engine_status and query_metrics on a real vLLM (CPU build) that Sleuth did not start: a
plain subprocess, as an operator runs one, under a steady streaming load; a real Prometheus
scraping it every second."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits, PrometheusSettings
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests.engine.conftest import free_port
from tests.engine.engine_env import EngineEnv
from tests.prometheus_server import PrometheusServer, missing_reason

MODEL_NAME = "tiny-llama"
CLIENTS = 2
MAX_TOKENS = 48


@dataclass
class Load:
    """Streaming clients, each token's arrival time kept, until `stop`."""

    port: int
    stop: threading.Event = field(default_factory=threading.Event)
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    """(arrival time, tokens in that chunk)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        body = json.dumps({
            "model": MODEL_NAME, "prompt": "the engine is", "max_tokens": MAX_TOKENS,
            "ignore_eos": True, "stream": True, "temperature": 0.0,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        })  # fmt: skip
        while not self.stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                seen = 0
                for raw in conn.getresponse():
                    line = raw.strip()
                    if not line.startswith(b"data: {"):
                        continue
                    # A loaded server may send several tokens in one chunk: the running
                    # usage says how many arrived.
                    usage = json.loads(line[6:]).get("usage") or {}
                    done = int(usage.get("completion_tokens") or seen)
                    if done > seen:
                        with self.lock:
                            self.arrivals.append((time.time(), done - seen))
                        seen = done
            except OSError as exc:
                self.errors.append(str(exc))
                time.sleep(0.5)
            finally:
                conn.close()

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            return sum(n for t, n in self.arrivals if start <= t <= end) / (end - start)


@dataclass
class Operator:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module")
def operator_vllm(
    engine_env: EngineEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """vLLM started by hand, as a systemd unit or a shell would: no Sleuth record of it."""
    folder = tmp_path_factory.mktemp("operator")
    port = free_port()
    log = folder / "vllm.log"
    argv = [
        str(engine_env.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(engine_env.model), "--served-model-name", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512",
    ]  # fmt: skip
    env = {**os.environ, **engine_env.server_env()}
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(1)
        else:
            pytest.fail(f"vLLM not healthy after 900 s: {log.read_text()[-3000:]}")
        yield Operator(port, proc, log)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def context(root: Path, prom: PrometheusServer | None = None) -> ToolContext:
    host = SandboxedHost("local", LocalHost("local"), HostConfig(roots=[str(root)]), Limits())
    settings = PrometheusSettings(url=prom.url) if prom else PrometheusSettings()
    return ToolContext(hosts={"local": host}, prometheus=settings)


def test_engine_status_reads_an_operator_started_vllm_and_its_rates_under_load(
    operator_vllm: Operator, tmp_path: Path
) -> None:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    ctx = context(tmp_path)
    snapshot = execute(ctx, "engine_status", {"host": "local", "port": operator_vllm.port})
    assert snapshot.ok, snapshot.output
    (report,) = snapshot.data["engines"]
    assert report["engine"] == "vllm" and report["version"] == "0.32.0", snapshot.output
    assert report["models"] == [MODEL_NAME]
    assert report["max_model_len"] == {MODEL_NAME: 512}
    assert report["pid"] == operator_vllm.proc.pid
    assert any(f["name"] == "kv_usage" for f in report["now"]), snapshot.output

    load = Load(operator_vllm.port)
    clients = [threading.Thread(target=load.run, daemon=True) for _ in range(CLIENTS)]
    for client in clients:
        client.start()
    prom = PrometheusServer(tmp_path / "prom", [f"127.0.0.1:{operator_vllm.port}"])
    try:
        time.sleep(8)  # the load reaches its steady state
        windowed = execute(
            ctx, "engine_status", {"host": "local", "port": operator_vllm.port, "window_s": 10}
        )
        assert windowed.ok, windowed.output
        (report,) = windowed.data["engines"]
        start = report["window_start"]
        measured = load.rate(start, start + report["window_s"])
        figures = {f["name"]: f for f in report["window"]}
        reported = figures["generation_tokens_per_s"]["value"]
        print(f"generation tok/s over {report['window_s']} s: engine_status {reported:.2f}, "
              f"the clients counted {measured:.2f}")  # fmt: skip
        assert measured > 0 and reported == pytest.approx(measured, rel=0.10), windowed.output
        assert figures["generation_tokens_per_s"]["series"] == ["vllm:generation_tokens_total"]
        assert figures["kv_usage_max"]["series"] == ["vllm:kv_cache_usage_perc"]

        prom.wait_for_samples("vllm:generation_tokens_total", 10)
        pctx = context(tmp_path, prom)
        for question in ("request_rate", "ttft_p50", "ttft_p99"):
            asked = execute(
                pctx, "query_metrics", {"host": "local", "question": question, "range_s": 30}
            )
            assert asked.ok, asked.output
            doc = prom.query(asked.data["promql"], asked.data["at"])
            direct = [float(r["value"][1]) for r in doc["data"]["result"]]
            assert [r["value"] for r in asked.data["rows"]] == direct, question
            assert direct and direct[0] > 0, (question, asked.output)
    finally:
        load.stop.set()
        prom.close()
        for client in clients:
            client.join(timeout=150)


def test_the_real_vllm_log_reads_as_a_series(operator_vllm: Operator, tmp_path: Path) -> None:
    """vLLM's own periodic 'Avg prompt throughput' lines, from the log of the server above."""
    ctx = context(operator_vllm.log.parent)
    result = execute(ctx, "engine_log_series", {"host": "local", "path": "vllm.log"})
    assert result.ok, result.output
    summary = {f["name"]: f["value"] for f in result.data["summary"]}
    print(result.output[:1500])
    assert summary["vllm_stats_lines"] >= 1, result.output
    assert summary["vllm_stats.gen_throughput_mean"] >= 0
