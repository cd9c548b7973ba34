"""Scripted model servers for tests: the Messages API and OpenAI chat completions.

    with ScriptedAPI([message(tool_use("t1", "read_json", path="config.json")),
                      message(text("done"))]) as api:
        brain = AnthropicBrain("claude-test", api_key="test", base_url=api.url)
        ...
    api.requests[0].body["tools"]

A script is a list of turns (served in order, one per request) or a callable
`(request_body, index) -> turn`. A turn is a Messages-API response dict, or a
Fault: an HTTP status (with headers, e.g. retry-after), a connection reset,
garbage JSON or a stall. Each fault takes one request. The OpenAI flavour
serves the same Messages-shaped turns, converted to chat completions, so one
script drives both brains. Every request is recorded with headers and body.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Turn = dict[str, Any]


@dataclass
class Fault:
    kind: Literal["status", "reset", "garbage", "stall"]
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    then: Turn | None = None
    """For a stall: the turn served after it (None serves an error)."""


def status(code: int, **headers: str) -> Fault:
    return Fault("status", code, {k.replace("_", "-"): v for k, v in headers.items()})


RESET = Fault("reset")
GARBAGE = Fault("garbage")


def stall(seconds: float, then: Turn | None = None) -> Fault:
    return Fault("stall", seconds=seconds, then=then)


_ids = itertools.count(1)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, **inputs: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": inputs}


def finding(
    call_id: str,
    claim: str,
    quotes: list[tuple[str, str]],
    verdict: str = "yes",
    confidence: float = 0.9,
    **extra: Any,
) -> dict[str, Any]:
    """A report_finding call quoting (call_id, quote) pairs."""
    evidence = [{"call_id": c, "quote": q} for c, q in quotes]
    return tool_use(
        call_id,
        "report_finding",
        claim=claim,
        verdict=verdict,
        confidence=confidence,
        evidence=evidence,
        **extra,
    )


def message(
    *blocks: dict[str, Any],
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_read: int = 0,
    cache_write: int = 0,
) -> Turn:
    uses_tools = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": "tool_use" if uses_tools else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }


def to_chat(turn: Turn) -> Turn:
    """A Messages-API response as an OpenAI chat completion."""
    content = "".join(b["text"] for b in turn["content"] if b["type"] == "text") or None
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in turn["content"]
        if b["type"] == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    usage = turn["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"]
    return {
        "id": f"chatcmpl-{turn['id']}",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": usage["output_tokens"],
            "total_tokens": prompt + usage["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cache_read_input_tokens"]},
        },
    }


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    at: float


Script = list[Turn | Fault] | Callable[[Any, int], Turn | Fault]


class ScriptedAPI:
    """A scripted model server on 127.0.0.1; `flavour` picks the wire format."""

    def __init__(self, script: Script, flavour: Literal["anthropic", "openai"] = "anthropic"):
        self.script, self.flavour = script, flavour
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        base = f"http://{host!s}:{port}"
        return base + "/v1" if self.flavour == "openai" else base

    def __enter__(self) -> ScriptedAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _next(self, body: Any) -> Turn | Fault:
        with self._lock:
            index = len(self.requests) - 1
            if callable(self.script):
                return self.script(body, index)
            if index >= len(self.script):
                return status(500)
            return self.script[index]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                with api._lock:
                    api.requests.append(
                        Recorded(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            time.monotonic(),
                        )
                    )
                self.serve(api._next(body))

            def serve(self, turn: Turn | Fault) -> None:
                if isinstance(turn, Fault):
                    if turn.kind == "reset":
                        # SO_LINGER 0 makes close() send RST: the client sees a reset.
                        self.connection.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                        self.connection.close()
                        self.close_connection = True
                        return
                    if turn.kind == "stall":
                        time.sleep(turn.seconds)
                        return self.serve(turn.then or status(500))
                    if turn.kind == "garbage":
                        return self.send(200, b"{not json at all", {})
                    error = {
                        "type": "error",
                        "error": {
                            "type": "overloaded_error" if turn.status == 529 else "api_error",
                            "message": "scripted",
                        },
                    }
                    return self.send(turn.status, json.dumps(error).encode(), turn.headers)
                payload = to_chat(turn) if api.flavour == "openai" else turn
                self.send(200, json.dumps(payload).encode(), {})

            def send(self, code: int, data: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a stall past its timeout)

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except OSError:
                    self.close_connection = True

        return Handler
