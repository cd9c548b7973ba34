"""A synthetic OpenAI-compatible streaming server with exact, known token timing.

Each request's chunks are sent at absolute deadlines measured from the moment the
handler starts (first token at T ms, then one chunk every D ms, k tokens per chunk),
so sleep overshoot never accumulates. The event loop uses `select()`, whose timeout
has microsecond resolution; epoll rounds every timer up to the next millisecond,
which would make each chunk up to 1 ms late.

Profiles are chosen by the request's `model` field, so one server process can play
several scenarios at once. Run it as an engine:

    python tests/streaming_server.py --port 8000 --ttft-ms 200 --itl-ms 20 --ready-line
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import selectors
import sys
import time
from dataclasses import dataclass, field
from typing import Any

READY_LINE = "The server is fired up and ready to roll!"


@dataclass
class Profile:
    """How one scenario streams. Times in milliseconds from the request's arrival."""

    ttft_ms: float = 200.0
    itl_ms: float = 20.0
    tokens_per_chunk: int = 1
    output_tokens: int | None = None
    """Tokens generated; None means max_tokens from the request."""
    role_frame: bool = False
    """Send a role-only first frame as soon as headers go out."""
    reasoning_tokens: int = 0
    """The first N tokens are reasoning_content; content then starts at content_ms."""
    content_ms: float | None = None
    tail_delay_ms: float = 0.0
    """Delay of the usage chunk and [DONE] after the last token."""
    usage_delta: int = 0
    """Added to the usage's completion_tokens, to disagree with the text."""
    fail_share: float = 0.0
    fail_seed: int = 0
    serialise: bool = False
    """Serve one request at a time (the others wait inside the server)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.fail_seed)


@dataclass
class SpecCounters:
    """SGLang-style cumulative speculative counters, deliberately not starting at zero."""

    accept_length_sum: float = 1500.0
    accept_count: int = 1000
    draft_tokens: int = 3000
    accepted_tokens: int = 500
    drafts: int = 1000

    def step(self, tokens: int) -> None:
        """One verify step that produced `tokens` tokens (accept length = tokens)."""
        self.accept_length_sum += tokens
        self.accept_count += 1
        self.drafts += 1
        self.draft_tokens += 3
        self.accepted_tokens += tokens - 1


def _chunk(model: str, chat: bool, delta: dict[str, Any], finish: str | None) -> bytes:
    if chat:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": delta.get("content", ""), "finish_reason": finish}
        kind = "text_completion"
    body = {"id": "cmpl-synthetic", "object": kind, "model": model, "choices": [choice]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def schedule(p: Profile, total: int) -> list[tuple[float, str, int]]:
    """(ms from arrival, delta field, tokens) for each chunk."""
    out: list[tuple[float, str, int]] = []
    reasoning = min(p.reasoning_tokens, total)
    at, left = p.ttft_ms, reasoning
    while left > 0:
        n = min(p.tokens_per_chunk, left)
        out.append((at, "reasoning_content", n))
        left -= n
        at += p.itl_ms
    if reasoning and p.content_ms is not None:
        at = p.content_ms
    left = total - reasoning
    while left > 0:
        n = min(p.tokens_per_chunk, left)
        out.append((at, "content", n))
        left -= n
        at += p.itl_ms
    return out


async def wait_until(deadline: float, spin_s: float) -> None:
    """Sleep until `deadline` (loop time), spinning through the last `spin_s` seconds.

    A busy machine wakes a sleeping process late by a few tenths of a millisecond;
    yielding in a loop for the last stretch keeps chunks on time to a few microseconds
    while other streams still run between our checks.
    """
    loop = asyncio.get_running_loop()
    delay = deadline - loop.time()
    if delay > spin_s:
        await asyncio.sleep(delay - spin_s)
    while loop.time() < deadline:
        await asyncio.sleep(0)


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: keep-alive, Content-Length bodies, chunked responses.

    The request's clock starts when its first byte arrives, so the server's own
    parsing and scheduling do not shift its timing.
    """

    def __init__(self, server: SyntheticServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.arrived: float | None = None
        self.busy = False
        self.task: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.can_write = asyncio.Event()
        self.can_write.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.buffer and self.arrived is None:
            self.arrived = asyncio.get_running_loop().time()
        self.buffer += data
        self.next_request()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.can_write.set()

    def next_request(self) -> None:
        if self.busy:
            return
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        lines = bytes(self.buffer[:head_end]).decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
        }
        length = int(headers.get("content-length", "0"))
        if len(self.buffer) < head_end + 4 + length:
            return
        body = bytes(self.buffer[head_end + 4 : head_end + 4 + length])
        del self.buffer[: head_end + 4 + length]
        arrived = self.arrived if self.arrived is not None else asyncio.get_running_loop().time()
        self.arrived = asyncio.get_running_loop().time() if self.buffer else None
        self.busy = True
        close = headers.get("connection", "").lower() == "close"
        self.task = asyncio.ensure_future(
            self.respond(method, path.split("?", 1)[0], body, arrived, close, headers)
        )

    async def respond(
        self,
        method: str,
        path: str,
        body: bytes,
        arrived: float,
        close: bool,
        headers: dict[str, str],
    ) -> None:
        try:
            if self.server.api_key and headers.get("authorization") != (
                f"Bearer {self.server.api_key}"
            ):
                await self.send_json(401, {"error": {"message": "Invalid API key", "code": 401}})
                return
            await self.server.handle(self, method, path, body, arrived)
        finally:
            self.busy = False
            if close and self.transport:
                self.transport.close()
            elif self.buffer:
                self.next_request()

    async def write(self, data: bytes) -> None:
        await self.can_write.wait()
        if self.transport is None:
            raise ConnectionError("client went away")
        self.transport.write(data)

    async def send_json(self, status: int, obj: Any) -> None:
        payload = json.dumps(obj).encode()
        await self.send_plain(status, payload, "application/json")

    async def send_plain(self, status: int, payload: bytes, kind: str = "text/plain") -> None:
        reason = {
            200: "OK",
            401: "Unauthorized",
            404: "Not Found",
            500: "Internal Server Error",
        }.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode()
        await self.write(head + payload)

    async def start_stream(self) -> None:
        await self.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )

    async def stream_part(self, data: bytes) -> None:
        await self.write(b"%x\r\n%s\r\n" % (len(data), data))

    async def end_stream(self) -> None:
        await self.write(b"0\r\n\r\n")


class SyntheticServer:
    def __init__(
        self,
        profiles: dict[str, Profile],
        default: str,
        spin_ms: float,
        api_key: str | None = None,
        tokenizer: str | None = None,
        model_root: str | None = None,
    ) -> None:
        self.profiles, self.default = profiles, default
        self.spin_s = spin_ms / 1000.0
        self.spec = SpecCounters()
        self.requests = 0
        self.api_key, self.model_root = api_key, model_root
        self.tokenizer: Any = None
        if tokenizer:
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(f"{tokenizer}/tokenizer.json")
        # vLLM-style prefix-cache counters: a system prompt seen before is a hit.
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.seen_prefixes: set[str] = set()
        self.arrivals: list[float] = []
        """When each generation request's first byte arrived (CLOCK_MONOTONIC, as the load
        generator's perf_counter), served at /arrivals for the replay-timing tests."""

    def count_tokens(self, text: str) -> int:
        if self.tokenizer is not None:
            return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return len(text.split())

    async def handle(
        self, conn: Connection, method: str, path: str, body: bytes, arrived: float
    ) -> None:
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            await self.generate(
                conn, json.loads(body or b"{}"), path.endswith("chat/completions"), arrived
            )
        elif path == "/v1/models":
            data = [
                {"id": name, "object": "model", "owned_by": "synthetic", "root": self.model_root}
                for name in self.profiles
            ]
            await conn.send_json(200, {"object": "list", "data": data})
        elif path in ("/health", "/health_generate"):
            await conn.send_plain(200, b"ok")
        elif path in ("/get_server_info", "/server_info"):
            await conn.send_json(200, self.server_info())
        elif path == "/metrics":
            await conn.send_plain(200, self.metrics().encode())
        elif path == "/arrivals":
            await conn.send_json(200, self.arrivals)
        else:
            await conn.send_json(404, {"error": {"message": f"no route {method} {path}"}})

    def server_info(self) -> dict[str, Any]:
        s = self.spec
        state = {
            "avg_spec_accept_length": s.accept_length_sum / s.accept_count,
            "cum_spec_accept_length": s.accept_length_sum,
            "cum_spec_accept_count": s.accept_count,
        }
        return {"internal_states": [state], "requests_served": self.requests}

    def metrics(self) -> str:
        s = self.spec
        return (
            "# TYPE vllm:spec_decode_num_drafts_total counter\n"
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {s.drafts}\n'
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {s.draft_tokens}\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {s.accepted_tokens}\n'
            f'vllm:prefix_cache_queries_total{{engine="0"}} {self.prefix_queries}\n'
            f'vllm:prefix_cache_hits_total{{engine="0"}} {self.prefix_hits}\n'
        )

    async def generate(
        self, conn: Connection, body: dict[str, Any], chat: bool, arrived: float
    ) -> None:
        model = str(body.get("model", self.default))
        profile = self.profiles.get(model, self.profiles[self.default])
        self.requests += 1
        self.arrivals.append(arrived)
        system = [m for m in body.get("messages", []) if m.get("role") == "system"]
        for m in system:
            n = self.count_tokens(str(m.get("content", "")))
            self.prefix_queries += n
            if m["content"] in self.seen_prefixes:
                self.prefix_hits += n
            self.seen_prefixes.add(m["content"])
        if profile.fail_share and profile.rng.random() < profile.fail_share:
            await conn.send_json(500, {"error": {"message": "synthetic failure"}})
            return
        if profile.serialise:
            async with profile.lock:
                await self.stream(
                    conn, body, profile, model, chat, asyncio.get_running_loop().time()
                )
            return
        await self.stream(conn, body, profile, model, chat, arrived)

    async def stream(
        self,
        conn: Connection,
        body: dict[str, Any],
        p: Profile,
        model: str,
        chat: bool,
        start: float,
    ) -> None:
        await conn.start_stream()
        if p.role_frame:
            await conn.stream_part(_chunk(model, chat, {"role": "assistant", "content": ""}, None))
        total = p.output_tokens if p.output_tokens is not None else int(body.get("max_tokens", 16))
        sent = 0
        for at, kind, n in schedule(p, total):
            # Built before the deadline so that only the write happens at it.
            words = "".join(f" w{sent + i}" for i in range(n))
            sent += n
            part = _chunk(model, chat, {kind: words}, "length" if sent >= total else None)
            await wait_until(start + at / 1000.0, self.spin_s)
            await conn.stream_part(part)
            self.spec.step(n)
        if p.tail_delay_ms:
            await asyncio.sleep(p.tail_delay_ms / 1000.0)
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt = body.get("prompt") or " ".join(
                str(m.get("content", "")) for m in body.get("messages", [])
            )
            usage = {
                "prompt_tokens": self.count_tokens(str(prompt)),
                "completion_tokens": sent + p.usage_delta,
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            tail = {
                "id": "cmpl-synthetic",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": usage,
            }
            await conn.stream_part(b"data: " + json.dumps(tail).encode() + b"\n\n")
        await conn.stream_part(b"data: [DONE]\n\n")
        await conn.end_stream()


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    ap.add_argument("--ttft-ms", type=float, default=200.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--output-tokens", type=int, default=None)
    ap.add_argument("--role-frame", action="store_true")
    ap.add_argument("--tail-delay-ms", type=float, default=0.0)
    ap.add_argument("--fail-share", type=float, default=0.0)
    ap.add_argument("--serialise", action="store_true")
    ap.add_argument("--model", default="synthetic", help="name of the default profile")
    ap.add_argument(
        "--profiles",
        default=None,
        help='JSON object {"name": {Profile fields}}; the model field picks one',
    )
    ap.add_argument(
        "--startup-delay-s",
        type=float,
        default=0.0,
        help="wait this long before listening (to exercise readiness polling)",
    )
    ap.add_argument(
        "--spin-ms",
        type=float,
        default=0.6,
        help="busy-wait the last this-many ms before each chunk, for exact timing",
    )
    ap.add_argument("--ready-line", action="store_true", help=f"print {READY_LINE!r} when ready")
    ap.add_argument("--api-key", default=None, help="refuse requests without this bearer key")
    ap.add_argument("--tokenizer", default=None, help="count prompt tokens with this tokenizer")
    ap.add_argument("--model-root", default=None, help="the `root` /v1/models reports")
    return ap.parse_args(argv)


def profiles_from(args: argparse.Namespace) -> dict[str, Profile]:
    default = Profile(
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        tokens_per_chunk=args.tokens_per_chunk,
        output_tokens=args.output_tokens,
        role_frame=args.role_frame,
        tail_delay_ms=args.tail_delay_ms,
        fail_share=args.fail_share,
        serialise=args.serialise,
    )
    profiles = {args.model: default}
    for name, fields in json.loads(args.profiles or "{}").items():
        profiles[name] = Profile(**fields)
    return profiles


async def serve(args: argparse.Namespace) -> None:
    if args.startup_delay_s:
        await asyncio.sleep(args.startup_delay_s)
    server = SyntheticServer(
        profiles_from(args),
        args.model,
        args.spin_ms,
        api_key=args.api_key,
        tokenizer=args.tokenizer,
        model_root=args.model_root,
    )
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: Connection(server), args.host, args.port, backlog=1024
    )
    port = listener.sockets[0].getsockname()[1]
    print(f"listening on http://{args.host}:{port}", flush=True)
    if args.ready_line:
        print(f"[{time.strftime('%H:%M:%S')}] {READY_LINE}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    asyncio.set_event_loop(loop)
    with contextlib.suppress(KeyboardInterrupt):
        loop.run_until_complete(serve(args))


if __name__ == "__main__":
    main()
