"""Context out: with export on, the engine's HTTP requests carry the W3C `traceparent` of the
call's span (the one the collector then receives), so an engine that traces (vLLM with
`--otlp-traces-endpoint`) puts its request spans under Sleuth's: the benchmark's requests
(`sleuth bench`, through the load generator) and launch_server's readiness probes."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sleuth.telemetry import ids
from tests.otlp_receiver import OtlpReceiver
from tests.sshd import free_port
from tests.test_telemetry import sleuth


def chunk(delta: dict[str, str], finish: str | None = None, **extra: object) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps({**body, **extra}).encode() + b"\n\n"


@contextmanager
def recording_engine() -> Iterator[tuple[str, list[str]]]:
    """An OpenAI-compatible streaming endpoint that keeps each request's traceparent."""
    seen: list[str] = []

    class Engine(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.headers.get("traceparent", ""))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
            for part in (
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "a"}),
                chunk({"content": "b"}, "length", usage=usage),
                b"data: [DONE]\n\n",
            ):
                self.wfile.write(part)
                self.wfile.flush()

        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def span_of(receiver: OtlpReceiver, tool: str) -> tuple[str, str]:
    [span] = [s for s in receiver.spans() if s.name == f"execute_tool {tool}"]
    return span.trace_id, span.span_id


def test_the_benchmark_s_requests_carry_the_run_benchmark_span(tmp_path: Path) -> None:
    with recording_engine() as (url, seen), OtlpReceiver() as receiver:
        done = sleuth(
            tmp_path,
            "bench",
            url,
            "-m",
            "m",
            "-c",
            "1",
            "-n",
            "3",
            "--warmup",
            "0",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--json",
            "--otlp-endpoint",
            receiver.url,
        )
    assert done.returncode == 0, done.stderr
    trace, span = span_of(receiver, "run_benchmark")
    [root] = [s for s in receiver.spans() if s.name == "sleuth tool run_benchmark"]
    assert trace == f"{ids.trace_id(root.attributes['gen_ai.conversation.id']):032x}"
    assert seen == [f"00-{trace}-{span}-01"] * 3


def test_without_export_the_engine_gets_no_traceparent(tmp_path: Path) -> None:
    with recording_engine() as (url, seen):
        done = sleuth(
            tmp_path,
            "bench",
            url,
            "-m",
            "m",
            "-c",
            "1",
            "-n",
            "2",
            "--warmup",
            "0",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--json",
        )
    assert done.returncode == 0, done.stderr
    assert seen == ["", ""]


ENGINE = """\
import http.server, sys
log, port = sys.argv[1], int(sys.argv[2])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as out:
            out.write((self.headers.get("traceparent") or "-") + "\\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def test_launch_server_s_readiness_probes_carry_the_launch_span(tmp_path: Path) -> None:
    engine, log, port = tmp_path / "engine.py", tmp_path / "probes.log", free_port()
    engine.write_text(ENGINE)
    argv = ["python3", str(engine), str(log), str(port)]
    (tmp_path / "sleuth.toml").write_text(
        textwrap.dedent(f"""\
        [hosts.local]
        roots = [{json.dumps(str(tmp_path))}]
        allow = ["launch_server"]
        [hosts.local.approve]
        commands = [{json.dumps(argv)}]
        """)
    )
    with OtlpReceiver() as receiver:
        done = sleuth(
            tmp_path,
            "tool",
            "launch_server",
            "engine=command",
            f"command={json.dumps(argv)}",
            f"ready_url=http://127.0.0.1:{port}/health",
            "timeout_s=30",
            "poll_s=0.2",
            "--json",
            "--otlp-endpoint",
            receiver.url,
        )
    result = json.loads(done.stdout)
    try:
        assert done.returncode == 0, done.stderr
        assert result["data"]["ready"] is True
        trace, span = span_of(receiver, "launch_server")
        probes = log.read_text().split()
        assert probes and set(probes) == {f"00-{trace}-{span}-01"}
    finally:
        os.killpg(result["data"]["pgid"], signal.SIGTERM)
