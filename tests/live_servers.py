"""HTTP servers on 127.0.0.1 for the live-engine tests.

- `Recorded`: serves recorded engine documents (tests/fixtures/live/, each with its URL in
  SOURCES.md) byte for byte, by path; any other path is a 404, as an engine answers.
- `Moving`: a /metrics page written by prometheus_client from counters a thread advances at
  known rates, every serve logged with its values, so a window's rates can be checked against
  what the server itself served.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

FIXTURES = Path(__file__).parent / "fixtures" / "live"
TTFTS = (0.05, 0.1, 0.1, 0.2, 0.3, 0.5, 1.0)
"""The time to first token of each request the moving page finishes, in turn."""


class _Server:
    def __init__(self, answer: Callable[[str], tuple[Any, ...]]) -> None:
        """`answer(path)`: (status, body, content type[, more headers])."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.paths.append(self.path)
                outer.authorizations.append(self.headers.get("Authorization"))
                status, body, kind, *more = answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.paths: list[str] = []
        self.authorizations: list[str | None] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Recorded(_Server):
    def __init__(self, pages: dict[str, str | bytes]) -> None:
        """`pages`: path -> a fixture file name, or the bytes to serve."""
        self.pages = {
            path: page if isinstance(page, bytes) else (FIXTURES / page).read_bytes()
            for path, page in pages.items()
        }
        super().__init__(self._answer)

    def _answer(self, path: str) -> tuple[int, bytes, str]:
        body = self.pages.get(path)
        if body is None:
            return 404, b'{"detail":"Not Found"}', "application/json"
        kind = "application/json" if body.lstrip()[:1] in (b"{", b"[") else "text/plain"
        return 200, body, kind


class Moving(_Server):
    """vLLM's V1 series, advanced every `tick` s: `tokens_per_tick` generation tokens, one
    spec-decode draft of `k` tokens with `accepted` of them taken, KV usage stepping."""

    def __init__(
        self,
        tick: float = 0.05,
        tokens_per_tick: int = 10,
        k: int = 4,
        accepted: int = 3,
        kv: float | None = None,
        model: str = "Qwen/Qwen3-0.6B",
    ) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.lock = threading.Lock()
        self.served: list[tuple[float, float, float]] = []
        """(time, generation tokens, kv usage) at each /metrics serve."""
        self.tick, self.tokens, self.k, self.accepted = tick, tokens_per_tick, k, accepted
        self.kv_level = kv
        """A KV usage held still (a full pool), else one stepping 0.0 to 0.9."""
        r = self.registry
        self.gen = Counter("vllm:generation_tokens", "gen", labels, registry=r).labels(model, "0")
        self.prompt = Counter("vllm:prompt_tokens", "p", labels, registry=r).labels(model, "0")
        self.drafts = Counter("vllm:spec_decode_num_drafts", "d", labels, registry=r).labels(
            model, "0"
        )
        self.drafted = Counter(
            "vllm:spec_decode_num_draft_tokens", "dt", labels, registry=r
        ).labels(model, "0")
        self.acc = Counter("vllm:spec_decode_num_accepted_tokens", "a", labels, registry=r).labels(
            model, "0"
        )
        self.kv = Gauge("vllm:kv_cache_usage_perc", "kv", labels, registry=r).labels(model, "0")
        self.running = Gauge("vllm:num_requests_running", "r", labels, registry=r).labels(
            model, "0"
        )
        self.waiting = Gauge("vllm:num_requests_waiting", "w", labels, registry=r).labels(
            model, "0"
        )
        self.requests = Counter(
            "vllm:request_success", "s", [*labels, "finished_reason"], registry=r
        ).labels(model, "0", "stop")
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "t",
            labels,
            registry=r,
            buckets=(0.04, 0.08, 0.16, 0.32, 0.64, 1.28),
        ).labels(model, "0")
        self.steps = 0
        self.stop = threading.Event()
        self.advancer = threading.Thread(target=self._advance, daemon=True)
        self.advancer.start()
        self.models = (
            b'{"object":"list","data":[{"id":"' + model.encode() + b'","object":"model",'
            b'"owned_by":"vllm","max_model_len":4096}]}'
        )
        super().__init__(self._answer)

    def _advance(self) -> None:
        while not self.stop.wait(self.tick):
            with self.lock:
                self.steps += 1
                self.gen.inc(self.tokens)
                self.prompt.inc(2 * self.tokens)
                self.drafts.inc(1)
                self.drafted.inc(self.k)
                self.acc.inc(self.accepted)
                self.kv.set((self.steps % 10) / 10 if self.kv_level is None else self.kv_level)
                self.running.set(self.steps % 7)
                # Never 0: a window whose few samples all met an empty queue (a loaded box
                # ticks late) would leave nothing queued to name.
                self.waiting.set(1 + self.steps % 3)
                self.requests.inc()
                self.ttft.observe(TTFTS[self.steps % len(TTFTS)])

    def _answer(self, path: str) -> tuple[int, bytes, str]:
        if path == "/metrics":
            with self.lock:
                body = generate_latest(self.registry)
                self.served.append((time.time(), self.gen._value.get(), self.kv._value.get()))
            return 200, body, "text/plain; version=0.0.4"
        if path == "/v1/models":
            return 200, self.models, "application/json"
        if path == "/version":
            return 200, b'{"version":"0.10.1"}', "application/json"
        if path == "/health":
            return 200, b"", "text/plain"
        return 404, b'{"detail":"Not Found"}', "application/json"

    def close(self) -> None:
        self.stop.set()
        super().close()
