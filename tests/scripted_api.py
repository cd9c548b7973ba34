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
script drives both brains, and answers `GET /v1/models` with `models` (as vLLM
does, with `max_model_len`) when given. A Messages request with `"stream": true`
is answered as server-sent events, as the real API streams. Every request is
recorded with headers and body.
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
    body: dict[str, Any] | None = None
    """For a status: the JSON error body (default: the Messages API's error shape)."""


def status(code: int, body: dict[str, Any] | None = None, **headers: str) -> Fault:
    return Fault("status", code, {k.replace("_", "-"): v for k, v in headers.items()}, body=body)


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
    stop_reason: str | None = None,
) -> Turn:
    """A Messages-API response; `stop_reason` defaults to tool_use or end_turn by its blocks."""
    uses_tools = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": stop_reason or ("tool_use" if uses_tools else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }


FINISH = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "max_tokens": "length",
    "refusal": "content_filter",
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
        "choices": [{"index": 0, "message": message, "finish_reason": FINISH[turn["stop_reason"]]}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": usage["output_tokens"],
            "total_tokens": prompt + usage["output_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cache_read_input_tokens"]},
        },
    }


def to_events(turn: Turn) -> bytes:
    """A Messages-API response as the server-sent events of a streamed one."""
    events: list[tuple[str, dict[str, Any]]] = []
    start = {**turn, "content": [], "stop_reason": None}
    start["usage"] = {**turn["usage"], "output_tokens": 0}
    events.append(("message_start", {"type": "message_start", "message": start}))
    for i, block in enumerate(turn["content"]):
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            empty = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": empty},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": turn["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    at: float


Script = list[Turn | Fault] | Callable[[Any, int], Turn | Fault]


class ScriptedAPI:
    """A scripted model server on 127.0.0.1; `flavour` picks the wire format."""

    def __init__(
        self,
        script: Script,
        flavour: Literal["anthropic", "openai"] = "anthropic",
        models: list[dict[str, Any]] | None = None,
    ):
        self.script, self.flavour, self.models = script, flavour, models
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
            index = sum(r.body is not None for r in self.requests) - 1  # POSTs only
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

            def do_GET(self) -> None:
                with api._lock:
                    api.requests.append(
                        Recorded(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            None,
                            time.monotonic(),
                        )
                    )
                if self.path == "/v1/models" and api.models is not None:
                    listing = {"object": "list", "data": api.models}
                    return self.send(200, json.dumps(listing).encode(), {})
                self.send(404, b'{"detail": "Not Found"}', {})

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
                stream = isinstance(body, dict) and body.get("stream") is True
                self.serve(api._next(body), stream)

            def serve(self, turn: Turn | Fault, stream: bool = False) -> None:
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
                        return self.serve(turn.then or status(500), stream)
                    if turn.kind == "garbage":
                        return self.send(200, b"{not json at all", {})
                    error = turn.body or {
                        "type": "error",
                        "error": {
                            "type": "overloaded_error" if turn.status == 529 else "api_error",
                            "message": "Overloaded" if turn.status == 529 else "scripted",
                        },
                    }
                    return self.send(turn.status, json.dumps(error).encode(), turn.headers)
                if stream and api.flavour == "anthropic":
                    return self.send(200, to_events(turn), {}, "text/event-stream")
                # A turn that is already a chat completion (odd arguments, say) goes out as is.
                raw = "choices" in turn
                payload = to_chat(turn) if api.flavour == "openai" and not raw else turn
                self.send(200, json.dumps(payload).encode(), {})

            def send(
                self,
                code: int,
                data: bytes,
                headers: dict[str, str],
                kind: str = "application/json",
            ) -> None:
                try:
                    self.send_response(code)
                    self.send_header("content-type", kind)
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
