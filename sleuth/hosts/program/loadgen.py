"""Sleuth's load generator for OpenAI-compatible streaming endpoints.

Self-contained (standard library plus aiohttp, uvloop when present) so it can be
sent to a serving host and run there with the engine's own Python:

    python3 - --url http://127.0.0.1:30000 --model M --concurrency 1,8 < loadgen.py

It writes one JSON line per request (times in seconds from the program's start,
on the monotonic perf_counter clock), one line per phase (client CPU use and
event-loop lag, for the honesty checks) and the server's speculative counters
before and after each phase. Metrics are computed elsewhere, from these lines.

Prompts are seeded words from a fixed vocabulary of common English words, each
of which is one token for the usual BPE tokenisers. With `--tokenizer DIR` (a
folder holding tokenizer.json, read with the `tokenizers` package when the host's
Python has it) prompts are cut to exactly `--input-len` tokens; without one,
lengths are words, and the header says so. Workloads (`--dataset`): random (with a
range ratio), sharegpt and jsonl files, prefix (groups sharing a system prefix),
multiturn (each turn resends the conversation so far) and trace (rows of arrival time,
input and output length and prefix-block hash ids, replayed at their times; a block's
text comes from its hash id alone, so equal ids in equal places make equal prefixes).
Header values (an API key) and a trace's rows arrive on stdin with the program
(SECRETS), never on the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import aiohttp

try:
    import orjson

    _loads: Any = orjson.loads
    JSON_LIB = "orjson"
except ImportError:
    _loads = json.loads
    JSON_LIB = "json"

VOCAB = (  # noqa: SIM905 (a word list reads better as one string)
    "the of and to in is you that it he was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each which "
    "she do how their if will up other about out many then them these so some her would make "
    "like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part "
    "over new sound take only little work know place year live me back give most very after "
    "thing our just name good sentence man think say great where help through much before "
    "line right too mean old any same tell boy follow came want show also around form three "
    "small set put end does another well large must big even such because turn here why ask "
    "went men read need land different home us move try kind hand picture again change off "
    "play spell air away animal house point page letter mother answer found study still "
    "learn should world"
).split()

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
LOOP_TICK_S = 0.005
AHEAD_MAX = 512
LOOKAHEAD_S = 1.0
"""Trace bodies due within this long of the first are built before the clock starts."""
BURST_S = 0.002
BUILD_SLACK_S = 0.003
"""Build the next trace body only while the next send is further away than this."""
BLOCK_SALT = 104_729
"""Mixed into a trace block's seed, so its words differ from request prompts'."""
BLOCK_CACHE = 8192
SECRETS: dict[str, Any] = globals().get("SECRETS", {})
ECHO_CAP = 300
"""The most characters of a server's error kept in a record."""


def sent_secrets(headers: dict[str, str]) -> list[str]:
    """The header values we send, and each word of them ("Bearer KEY": the key alone)."""
    values = [v for v in headers.values() if len(v) >= 4]
    return values + [w for v in values for w in v.split() if len(w) >= 4]


SENT = sent_secrets(SECRETS.get("headers", {}))


def scrubbed(text: str, secrets: list[str], cap: int = ECHO_CAP) -> str:
    """A server's error as a record keeps it: every header value we sent (an API key a server
    echoes back) hidden BEFORE the cut, and the cut made before the word it went through, so
    no part of a secret shows. Sleuth redacts the records again as they arrive."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, "[REDACTED:known-secret]")
    if len(text) <= cap:
        return text
    return text[:cap].rpartition(" ")[0] + " [cut]"


"""Filled by the runner from stdin (sleuth.hosts.program.secret_runner); empty when run plainly."""

now = time.perf_counter


def make_prompt(seed: int, index: int, words: int) -> str:
    """The prompt for request `index`: `words` seeded words, distinct per request."""
    rng = random.Random(seed * 1_000_003 + index)
    return " ".join(rng.choice(VOCAB) for _ in range(words))


def poisson_schedule(rate: float, count: int, seed: int) -> list[float]:
    """Seconds from the start at which each of `count` requests is due (Poisson arrivals).

    Gaps are exponential with mean 1/rate, drawn by stratified inverse-CDF sampling
    (one uniform per 1/count slice, then shuffled): each gap is still exponential, but
    a run of a few hundred requests has the asked rate to within a fraction of a
    percent instead of the few percent plain sampling leaves. A rate of 0 or less
    sends them all at once.
    """
    if rate <= 0:
        return [0.0] * count
    rng = random.Random(seed)
    gaps = [-math.log(1.0 - (k + rng.random()) / count) / rate for k in range(count)]
    rng.shuffle(gaps)
    out, t = [], 0.0
    for gap in gaps:
        out.append(t)
        t += gap
    return out


def arrival_schedule(
    rate: float,
    count: int,
    seed: int,
    burstiness: float = 1.0,
    ramp: tuple[float, float] | None = None,
) -> list[float]:
    """Due times of `count` requests: gamma-distributed gaps of shape `burstiness` (1 is
    Poisson; smaller is burstier, with a coefficient of variation of 1/sqrt(shape)), at
    `rate`, or at a rate moving linearly from ramp[0] to ramp[1] over the run."""
    if ramp is None and burstiness == 1.0:
        return poisson_schedule(rate, count, seed)
    if ramp is None and rate <= 0:
        return [0.0] * count
    rng = random.Random(seed)
    out, t = [], 0.0
    for k in range(count):
        out.append(t)
        r = rate if ramp is None else ramp[0] + (ramp[1] - ramp[0]) * k / max(count - 1, 1)
        t += rng.gammavariate(burstiness, 1.0 / (max(r, 1e-9) * burstiness))
    return out


class Tokens:
    """Exact prompt lengths with the model's own tokenizer (the `tokenizers` package)."""

    def __init__(self, folder: str) -> None:
        from tokenizers import Tokenizer  # the host's engine venv has it; sleuth does not

        self.tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))

    def count(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=False).ids)

    def cut(self, text: str, n: int) -> tuple[str, int]:
        """`text` (longer than n tokens) cut to n tokens, re-checked after decoding."""
        for _ in range(4):
            ids = self.tok.encode(text, add_special_tokens=False).ids
            if len(ids) < n:
                text += " the" * (n - len(ids))
                continue
            text = self.tok.decode(ids[:n])
            got = self.count(text)
            if got == n:
                return text, n
        return text, self.count(text)


class Item:
    """What one request asks: its prompt (or a turn of a conversation) and output length."""

    __slots__ = (
        "conv",
        "index",
        "input_tokens",
        "output_len",
        "prefix",
        "prompt",
        "row",
        "turn",
    )

    def __init__(
        self,
        prompt: str,
        output_len: int,
        input_tokens: int | None = None,
        conv: int | None = None,
        turn: int = 0,
        prefix: str | None = None,
        row: list[Any] | None = None,
    ) -> None:
        self.prompt, self.output_len, self.input_tokens = prompt, output_len, input_tokens
        self.conv, self.turn, self.prefix = conv, turn, prefix
        self.row = row
        """A trace row whose prompt is built only when its request is (see Workload.fill)."""
        self.index = -1


class Workload:
    """The seeded stream of requests a dataset makes; item(i) is request i's content."""

    def __init__(
        self, args: argparse.Namespace, tokens: Tokens | None, trace: list[list[Any]] | None = None
    ) -> None:
        self.a, self.tokens = args, tokens
        self.trace = trace
        self.blocks: dict[int, str] = {}
        self.rows: list[tuple[str, int | None]] = []
        if args.dataset in ("sharegpt", "jsonl"):
            self.rows = load_rows(args.dataset, args.dataset_path)
            random.Random(args.seed).shuffle(self.rows)
        self.prefixes = [
            self.text(make_prompt(args.seed + 7919, -1 - g, args.prefix_len + 8), args.prefix_len)[
                0
            ]
            for g in range(args.prefix_groups if args.dataset == "prefix" else 0)
        ]

    def text(self, words: str, n: int) -> tuple[str, int | None]:
        if self.tokens is None:
            return words, None
        return self.tokens.cut(words, n)

    def length(self, rng: random.Random, base: int) -> int:
        r = self.a.range_ratio
        return max(1, round(rng.uniform(base * (1 - r), base * (1 + r)))) if r else base

    def item(self, i: int) -> Item:
        a = self.a
        rng = random.Random(a.seed * 1_000_003 + i)
        if self.trace is not None:
            row = self.trace[(i - a.warmup) % len(self.trace)]
            if i < a.warmup:  # warm-up: the trace's lengths, none of its prefixes
                prompt, counted = self.text(make_prompt(a.seed + 17, i, row[1] + 8), row[1])
                return Item(prompt, row[2], counted)
            return Item("", row[2], row=row)
        if self.rows:
            prompt, out = self.rows[i % len(self.rows)]
            n = self.tokens.count(prompt) if self.tokens else None
            return Item(prompt, out or a.output_len, n)
        n_in, n_out = self.length(rng, a.input_len), self.length(rng, a.output_len)
        words = make_prompt(a.seed, i, n_in + (8 if self.tokens else 0))
        prompt, counted = self.text(words, n_in)
        if a.dataset == "prefix":
            group = i % len(self.prefixes)
            return Item(prompt, n_out, counted, conv=group, prefix=self.prefixes[group])
        if a.dataset == "multiturn":
            return Item(prompt, n_out, counted, conv=i // a.turns, turn=i % a.turns)
        return Item(prompt, n_out, counted)

    def fill(self, item: Item) -> None:
        """Build a trace row's prompt: one block per hash id (cut to the row's input length),
        then words of its own for any length beyond its blocks."""
        if item.row is None or item.prompt:
            return
        _, n_in, _, ids = item.row
        size = self.a.block_size
        parts = [self.block(h) for h in ids[: -(-n_in // size)]]
        extra = n_in - len(parts) * size
        if extra < 0:
            parts[-1] = self.cut(parts[-1], size + extra)
        elif extra > 0:
            words = make_prompt(self.a.seed + 31, item.index, extra + 8)
            parts.append(self.cut(words, extra))
        item.prompt = " ".join(parts)
        item.input_tokens = self.tokens.count(item.prompt) if self.tokens else None

    def block(self, hash_id: int) -> str:
        """The text of one prefix block: a function of its hash id (and the seed) only."""
        text = self.blocks.get(hash_id)
        if text is None:
            if len(self.blocks) >= BLOCK_CACHE:
                self.blocks.clear()
            size = self.a.block_size
            words = make_prompt(self.a.seed + BLOCK_SALT, hash_id, size + 8)
            text = self.blocks[hash_id] = self.cut(words, size)
        return text

    def cut(self, text: str, n: int) -> str:
        """The first n tokens of `text` (with a tokenizer), else its first n words."""
        if self.tokens is not None:
            return self.tokens.cut(text, n)[0]
        return " ".join(text.split(" ", n)[:n])


def load_rows(kind: str, path: str) -> list[tuple[str, int | None]]:
    """(prompt, output length or None) from a ShareGPT JSON file or a JSONL of prompts."""
    rows: list[tuple[str, int | None]] = []
    with open(path, encoding="utf-8") as fh:
        if kind == "jsonl":
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
                    raise ValueError(f'{path}:{number}: each line needs a string "prompt"')
                out = obj.get("output_len")
                if out is not None and (not isinstance(out, int) or out < 1):
                    raise ValueError(f"{path}:{number}: output_len must be a positive integer")
                rows.append((obj["prompt"], out))
        else:
            for conv in json.load(fh):
                turns = conv.get("conversations") or conv.get("conversation") or []
                if len(turns) >= 2 and turns[0].get("value"):
                    reply = str(turns[1].get("value") or "")
                    rows.append((str(turns[0]["value"]), max(1, len(reply.split()))))
    if not rows:
        raise ValueError(f"{path}: no usable prompts in this {kind} file")
    return rows


def estimate_tokens(text: str) -> int:
    """Tokens in `text` when the server does not say: words and punctuation marks."""
    # Fast path, same answer as the regex: a chunk is nearly always one word or one
    # mark (with a leading space), which is exactly one match of TOKEN_RE. str.strip
    # and str.isalnum use the same Unicode classes as re's \s and \w.
    word = text.strip()
    if len(word) <= 1 or word.isalnum():
        return 1
    return max(1, len(TOKEN_RE.findall(text)))


class Request:
    """One request's body and what happened to it. Becomes one JSON line.

    What the stream shows is kept in slots while it arrives (a chunk costs a parse,
    a few attribute reads and two list appends) and copied into the record once,
    when the request ends.
    """

    __slots__ = (
        "body",
        "chunk_n",
        "chunk_t",
        "done_marker",
        "error",
        "estimated",
        "finish_reason",
        "rec",
        "seen_ct",
        "t_first",
        "t_first_content",
        "texts",
        "usage",
    )

    def __init__(self, body: bytes, rec: dict[str, Any], keep_text: bool = False) -> None:
        self.body, self.rec = body, rec
        self.texts: list[str] | None = [] if keep_text else None
        self.seen_ct = 0
        self.chunk_t: list[float] = []
        self.chunk_n: list[int] = []
        self.t_first: float | None = None
        self.t_first_content: float | None = None
        self.usage: Any = None
        self.finish_reason: Any = None
        self.estimated = False
        self.done_marker = False
        self.error: str | None = None

    def on_event(self, payload: bytes, t: float) -> None:
        if payload == b"[DONE]":
            self.done_marker = True
            return
        obj = _loads(payload)
        if not isinstance(obj, dict):
            raise ValueError(f"stream event is not a JSON object: {payload[:100]!r}")
        choices = obj.get("choices")
        if not choices:
            if "error" in obj:
                self.error = "stream error: " + scrubbed(json.dumps(obj["error"]), SENT)
                return
            choices = ()
        usage = obj.get("usage")
        if usage:
            self.usage = usage
        for choice in choices:
            delta = choice.get("delta")
            if delta is None:
                content, reasoning, tools = choice.get("text"), None, None
            else:
                content = delta.get("content")
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                tools = delta.get("tool_calls")
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = finish
            if not (content or reasoning or tools):
                continue
            if self.t_first is None:
                self.t_first = t
            if content and self.t_first_content is None:
                self.t_first_content = t
            if content and self.texts is not None:
                self.texts.append(content)
            self.chunk_t.append(t)
            self.chunk_n.append(self.count(usage, content, reasoning, tools))

    def count(self, usage: Any, content: Any, reasoning: Any, tools: Any) -> int:
        # A server sending usage with every chunk (vLLM's continuous_usage_stats) says
        # exactly how many tokens each chunk holds; otherwise we estimate and say so.
        if usage:
            completion = usage.get("completion_tokens")
            if isinstance(completion, int) and completion > self.seen_ct:
                n, self.seen_ct = completion - self.seen_ct, completion
                return n
        self.estimated = True
        if content and not reasoning:
            return estimate_tokens(content)
        text = (content or "") + (reasoning or "")
        if tools and not text:
            text = json.dumps(tools)
        return estimate_tokens(text)

    def finish(self) -> dict[str, Any]:
        """The record, with what the stream showed copied in."""
        rec = self.rec
        rec["chunk_t"], rec["chunk_n"] = self.chunk_t, self.chunk_n
        rec["t_first"], rec["t_first_content"] = self.t_first, self.t_first_content
        rec["t_last_token"] = self.chunk_t[-1] if self.chunk_t else None
        rec["usage"], rec["finish_reason"] = self.usage, self.finish_reason
        rec["tokens_estimated"], rec["done_marker"] = self.estimated, self.done_marker
        if rec["error"] is None:
            rec["error"] = self.error
        return rec


class Ahead:
    """Request bodies built before their time, up to AHEAD_MAX at once (all of them when
    the dataset's prompts are small enough to build before the clock starts)."""

    def __init__(
        self, gen: LoadGen, phase: int, units: list[list[Item]], schedule: list[float]
    ) -> None:
        self.gen, self.phase, self.units, self.schedule = gen, phase, units, schedule
        self.ready: dict[int, Request] = {}
        self.next = 0
        if not gen.lazy:
            self.build(lambda k: True, limit=len(units))

    def build(self, wanted: Callable[[int], bool], limit: int = 0) -> None:
        """Build the next bodies in order while `wanted(index)` holds."""
        while self.due(wanted, limit):
            self.build_next()

    def due(self, wanted: Callable[[int], bool], limit: int = 0) -> bool:
        cap = limit or AHEAD_MAX
        return self.next < len(self.units) and len(self.ready) < cap and wanted(self.next)

    def build_next(self) -> None:
        unit = self.units[self.next]
        self.ready[self.next] = self.gen.new_request(self.phase, False, unit[0])
        self.next += 1

    async def build_before(self, start: float, due: float) -> None:
        """Build what is due with the send at `due` (a burst), then more while that send
        is further off than BUILD_SLACK_S, letting sends and streams run between bodies."""

        def wanted(j: int) -> bool:
            return self.schedule[j] <= due + BURST_S or start + due - now() > BUILD_SLACK_S

        while self.due(wanted):
            self.build_next()
            await asyncio.sleep(0)

    def take(self, k: int) -> Request:
        if k not in self.ready:
            self.build(lambda j: j <= k)
        return self.ready.pop(k)


class LoadGen:
    def __init__(self, args: argparse.Namespace, tokens: Tokens | None = None) -> None:
        self.args = args
        self.url = args.url.rstrip("/") + (
            "/v1/chat/completions" if args.api == "chat" else "/v1/completions"
        )
        trace = SECRETS.get("trace")
        self.workload = Workload(args, tokens, trace["rows"] if trace else None)
        self.lazy = trace is not None
        """Trace prompts are built one request at a time: a whole trace's would not fit."""
        self.headers = {"Content-Type": "application/json", **SECRETS.get("headers", {})}
        if args.traceparent:  # Sleuth's trace context: a tracing engine joins the run's span
            self.headers["traceparent"] = args.traceparent
        self.extra_body = json.loads(args.extra_body) if args.extra_body else {}
        self.records: list[dict[str, Any]] = []
        self.next_index = 0
        self.turns = args.turns if args.dataset == "multiturn" else 1

    def units(self, phase: int, warmup: bool, count: int) -> list[list[Item]]:
        """`count` requests grouped into what must run one after another (a conversation)."""
        items = []
        for _ in range(count):
            item = self.workload.item(self.next_index)
            item.index = self.next_index
            items.append(item)
            self.next_index += 1
        out: list[list[Item]] = []
        for item in items:
            if out and item.conv is not None and item.turn and out[-1][-1].conv == item.conv:
                out[-1].append(item)
            else:
                out.append([item])
        return out

    def new_request(
        self, phase: int, warmup: bool, item: Item, history: list[dict[str, str]] | None = None
    ) -> Request:
        a = self.args
        self.workload.fill(item)
        body: dict[str, Any] = {
            "model": a.model,
            "max_tokens": item.output_len,
            "stream": True,
            # Usage in every chunk, so each chunk's tokens are the server's own count: both
            # engines take it (vllm/entrypoints/serve/utils/api_utils.py,
            # sglang/srt/entrypoints/openai/protocol.py StreamOptions).
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": a.temperature,
        }
        if a.ignore_eos:
            body["ignore_eos"] = True
        if a.api == "chat":
            system = [{"role": "system", "content": item.prefix}] if item.prefix else []
            body["messages"] = [*system, *(history or []), {"role": "user", "content": item.prompt}]
        else:
            earlier = "".join(m["content"] + "\n" for m in history or [])
            body["prompt"] = (item.prefix + "\n" if item.prefix else "") + earlier + item.prompt
        body.update(self.extra_body)
        rec: dict[str, Any] = {
            "type": "request",
            "index": item.index,
            "phase": phase,
            "warmup": warmup,
            "input_words": len(item.prompt.split()),
            "input_tokens_client": item.input_tokens,
            "requested_output": item.output_len,
            "conv": item.conv,
            "turn": item.turn,
            "t_sched": None,
            "t_dispatch": None,
            "t_send": None,
            "t_first": None,
            "t_first_content": None,
            "t_done": None,
            "chunk_t": [],
            "chunk_n": [],
            "tokens_estimated": False,
            "usage": None,
            "finish_reason": None,
            "status": None,
            "error": None,
            "done_marker": False,
        }
        return Request(json.dumps(body).encode(), rec, keep_text=self.turns > 1)

    async def send(self, session: aiohttp.ClientSession, req: Request) -> None:
        rec = req.rec
        rec["t_send"] = now()
        try:
            async with session.post(
                self.url, data=req.body, trace_request_ctx=rec, headers=self.headers
            ) as resp:
                rec["status"] = resp.status
                if resp.status != 200:
                    text = (await resp.read())[:65536].decode(errors="replace")
                    rec["error"] = f"HTTP {resp.status}: {scrubbed(text, SENT)}"
                else:
                    await self.read_stream(resp, req)
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            said = scrubbed(f"{type(exc).__name__}: {exc}", SENT)
            rec["error"] = f"{said} (at {self.url})"
        rec["t_done"] = now()
        self.records.append(req.finish())

    @staticmethod
    async def read_stream(resp: aiohttp.ClientResponse, req: Request) -> None:
        # One await per socket read (readany, not a line at a time), one split per
        # read; a line cut across reads waits in `pending` for the rest of it.
        read, on_event = resp.content.readany, req.on_event
        pending = b""
        while True:
            data = await read()
            if not data:
                break
            t = now()
            if pending:
                data = pending + data
            # Split on \n alone: a CRLF line keeps its \r, which strip() takes off below
            # (and a blank "\r" line is no data line), so a \r\n cut in two needs nothing.
            lines = data.split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line[:5] == b"data:":
                    on_event(line[5:].strip(), t)
        tail = pending.strip()
        if tail[:5] == b"data:":
            on_event(tail[5:].strip(), now())

    async def run_unit(
        self,
        session: aiohttp.ClientSession,
        phase: int,
        warmup: bool,
        unit: list[Item],
        first: Request,
    ) -> None:
        """One request, or a conversation's turns in order, each resending what came before."""
        history: list[dict[str, str]] = []
        req = first
        for k, item in enumerate(unit):
            if k:  # the first turn's times were stamped by whoever dispatched it
                req = self.new_request(phase, warmup, item, history)
                req.rec["t_sched"] = req.rec["t_dispatch"] = now()
            await self.send(session, req)
            history += [
                {"role": "user", "content": item.prompt},
                {"role": "assistant", "content": "".join(req.texts or ())},
            ]

    def expired(self, start: float) -> bool:
        d = self.args.duration
        return d is not None and now() - start >= d

    async def closed_loop(
        self, session: aiohttp.ClientSession, phase: int, concurrency: int, count: int, warmup: bool
    ) -> None:
        # Bodies are built before the clock starts: building one while other streams
        # are arriving would delay their timestamps by the client's own work.
        units = self.units(phase, warmup, count)
        queue = [(u, None if self.lazy else self.new_request(phase, warmup, u[0])) for u in units]
        queue.reverse()
        start = now()

        async def worker() -> None:
            while queue and (warmup or not self.expired(start)):
                unit, ready = queue.pop()
                req = ready or self.new_request(phase, warmup, unit[0])
                req.rec["t_sched"] = req.rec["t_dispatch"] = now()
                await self.run_unit(session, phase, warmup, unit, req)

        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(units)))))

    async def open_loop(
        self,
        session: aiohttp.ClientSession,
        phase: int,
        rate: float | None,
        count: int,
        lags: list[float],
    ) -> None:
        a = self.args
        cap = a.max_concurrency
        slots = asyncio.Semaphore(cap) if cap else None

        async def go(unit: list[Item], req: Request) -> None:
            if slots is None:
                await self.run_unit(session, phase, False, unit, req)
                return
            async with slots:
                await self.run_unit(session, phase, False, unit, req)

        tasks = []
        ramp = (a.ramp_up[0], a.ramp_up[1]) if a.ramp_up else None
        if rate is None:  # a trace replayed at its own (scaled) times
            units = self.units(phase, False, count)
            schedule = [u[0].row[0] if u[0].row else 0.0 for u in units]
        else:
            schedule = arrival_schedule(rate, count, a.seed, a.burstiness, ramp)
            if a.duration is not None:  # build only what the duration has time to send
                schedule = [due for due in schedule if due < a.duration] or schedule[:1]
            units = self.units(phase, False, len(schedule))
        ahead = Ahead(self, phase, units, schedule)
        ahead.build(lambda k: schedule[k] <= schedule[0] + LOOKAHEAD_S)
        start = now()
        for k, (unit, due) in enumerate(zip(units, schedule, strict=True)):
            if a.duration is not None and due >= a.duration:
                break
            # Trace bodies are built ahead: all of a burst before its first send, and more
            # while the wait for the next send leaves time, so only sends happen on time.
            await ahead.build_before(start, due)
            req = ahead.take(k)
            delay = start + due - now()
            if delay > 0:
                await asyncio.sleep(delay)
            req.rec["t_sched"] = start + due
            req.rec["t_dispatch"] = now()
            lags.append(req.rec["t_dispatch"] - req.rec["t_sched"])
            tasks.append(asyncio.ensure_future(go(unit, req)))
        await asyncio.gather(*tasks)

    async def counters(self, session: aiohttp.ClientSession) -> dict[str, Any]:
        """The server's speculative counters, as raw as we can get them, or nothing."""
        base = self.args.url.rstrip("/")
        out: dict[str, Any] = {"t": now()}
        for path in ("/get_server_info", "/metrics"):
            try:
                async with session.get(base + path, timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status == 200:
                        text = await r.text()
                        out[path] = _spec_fields(path, text)
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                continue
        return out

    async def phase(
        self,
        session: aiohttp.ClientSession,
        phase: int,
        concurrency: int | None,
        rate: float | None,
    ) -> dict[str, Any]:
        a = self.args
        before = await self.counters(session) if a.spec_counters else None
        loop_lags: list[float] = []
        dispatch_lags: list[float] = []
        running = [True]

        async def watch_loop() -> None:
            while running[0]:
                t = now()
                await asyncio.sleep(LOOP_TICK_S)
                loop_lags.append(now() - t - LOOP_TICK_S)

        watcher = asyncio.ensure_future(watch_loop())
        cpu0, wall0 = time.process_time(), now()
        if concurrency is not None:
            await self.closed_loop(session, phase, concurrency, a.num_prompts, False)
        else:
            await self.open_loop(session, phase, rate, a.num_prompts, dispatch_lags)
        cpu, wall = time.process_time() - cpu0, now() - wall0
        running[0] = False
        await watcher
        after = await self.counters(session) if a.spec_counters else None
        return {
            "type": "phase",
            "phase": phase,
            "mode": "closed" if concurrency else "open",
            "concurrency": concurrency,
            "request_rate": rate,
            "max_concurrency": a.max_concurrency,
            "t_start": wall0,
            "t_end": wall0 + wall,
            "cpu_s": cpu,
            "wall_s": wall,
            "loop_lag": _summary(loop_lags),
            "dispatch_lag": _summary(dispatch_lags) if concurrency is None else None,
            "counters_before": before,
            "counters_after": after,
        }

    async def run(self, out: Any) -> int:
        a = self.args
        header = {
            "type": "header",
            "version": 1,
            "url": self.url,
            "api": a.api,
            "model": a.model,
            "seed": a.seed,
            "input_len": a.input_len,
            "output_len": a.output_len,
            "num_prompts": a.num_prompts,
            "warmup": a.warmup,
            "concurrency": a.concurrency,
            "request_rate": a.request_rate,
            "max_concurrency": a.max_concurrency,
            "dataset": a.dataset,
            "dataset_path": a.dataset_path,
            "range_ratio": a.range_ratio,
            "prefix_len": a.prefix_len if a.dataset == "prefix" else None,
            "prefix_groups": a.prefix_groups if a.dataset == "prefix" else None,
            "turns": a.turns if a.dataset == "multiturn" else None,
            "trace": {k: v for k, v in SECRETS["trace"].items() if k != "rows"}
            if self.lazy
            else None,
            "block_size": a.block_size if self.lazy else None,
            "burstiness": a.burstiness,
            "ramp_up": a.ramp_up,
            "duration": a.duration,
            "temperature": a.temperature,
            "ignore_eos": a.ignore_eos,
            "extra_body": self.extra_body,
            "header_names": sorted(SECRETS.get("headers", {})),
            "tokenizer": a.tokenizer,
            "length_unit": "tokens" if self.workload.tokens else "words",
            "label": a.label,
            "epoch_at_zero": time.time() - now(),
            "python": sys.version.split()[0],
            "aiohttp": aiohttp.__version__,
            "uvloop": UVLOOP_USED,
            "json": JSON_LIB,
            "pid": os.getpid(),
        }
        _write(out, header)
        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=a.request_timeout)
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, trace_configs=[_send_time_trace()]
        ) as session:
            if a.warmup:
                # An open loop's warm-up goes all at once, so its bursts find as many
                # connections already open.
                first = a.concurrency[0] if a.concurrency else a.warmup
                await self.closed_loop(session, -1, first, a.warmup, True)
                self.flush(out)
            plan: list[tuple[int | None, float | None]] = (
                [(c, None) for c in a.concurrency] if a.concurrency else [(None, a.request_rate)]
            )
            for number, (concurrency, rate) in enumerate(plan):
                summary = await self.phase(session, number, concurrency, rate)
                self.flush(out)
                _write(out, summary)
        return self.next_index

    def flush(self, out: Any) -> None:
        for rec in sorted(self.records, key=lambda r: r["index"]):
            _write(out, rec)
        self.records.clear()


def find_tokenizer(args: argparse.Namespace) -> str | None:
    """The served model's folder, as /v1/models reports it (vLLM's `root`), when it holds a
    tokenizer.json, lies inside the allowed roots, and the `tokenizers` package is here."""
    import urllib.request

    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return None
    try:
        with urllib.request.urlopen(args.url.rstrip("/") + "/v1/models", timeout=5) as resp:
            models = json.loads(resp.read()).get("data") or []
    except (OSError, ValueError):
        return None
    roots = [os.path.realpath(r) for r in args.roots.split(",") if r]
    for model in models:
        root = model.get("root") if isinstance(model, dict) else None
        if not isinstance(root, str) or not os.path.isfile(os.path.join(root, "tokenizer.json")):
            continue
        real = os.path.realpath(root)
        if any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            return real
    return None


def _send_time_trace() -> aiohttp.TraceConfig:
    """Stamp t_send when the request's headers are written, not when we began building it.

    Building a request and taking a pooled connection costs the client a few tenths of
    a millisecond that the server never sees; that time belongs to the client
    (t_dispatch to t_send), not to the server's time to first token.
    """

    async def headers_sent(session: Any, ctx: Any, params: Any) -> None:
        rec = ctx.trace_request_ctx
        if isinstance(rec, dict):
            rec["t_send"] = now()

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(headers_sent)
    return trace


METRIC_PREFIXES = (
    "vllm:spec_decode_num_",
    "vllm:prefix_cache_",
    "vllm:num_preemptions",
    "vllm:request_queue_time_seconds_sum",
    "vllm:request_queue_time_seconds_count",
    "sglang:cache_hit_rate",
    "sglang:queue_time_seconds_sum",
    "sglang:queue_time_seconds_count",
    "sglang:num_retracted_reqs",
    "sglang:spec_accept_length",
)
"""The /metrics series whose change over a phase explains it: speculative acceptance,
prefix-cache hits, queue time, preemptions (vLLM) and retractions (SGLang)."""


def metric_totals(text: str, prefixes: tuple[str, ...]) -> dict[str, float]:
    """Prometheus text (a server's /metrics): for each series whose name starts with one of
    `prefixes`, the sum of its samples over all labels; per-position series are left out.
    Sleuth's server_status reads vLLM's /metrics with it too: one parser for both."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(prefixes) and "per_pos" not in line:
            name, _, value = line.rpartition(" ")
            key = name.split("{", 1)[0]
            try:
                totals[key] = totals.get(key, 0.0) + float(value)
            except ValueError:
                continue
    return totals


def _spec_fields(path: str, text: str) -> dict[str, float]:
    if path == "/metrics":
        return metric_totals(text, METRIC_PREFIXES)
    fields: dict[str, float] = {}
    states = json.loads(text).get("internal_states") or [{}]
    for key, value in (states[0] or {}).items():
        if "spec" in key and isinstance(value, (int, float)):
            fields[key] = float(value)
    return fields


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, "mean": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "mean": sum(ordered) / len(ordered),
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max": ordered[-1],
    }


def _write(out: Any, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")


UVLOOP_USED = False


def _runner(refuse_uvloop: bool) -> Any:
    """uvloop's run when it is installed (its loop costs less per socket read), else asyncio's."""
    global UVLOOP_USED
    if refuse_uvloop:
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    UVLOOP_USED = True
    run = getattr(uvloop, "run", None)
    if run is not None:
        return run

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())  # uvloop before 0.18 has no run()
    return asyncio.run


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="loadgen", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:30000")
    ap.add_argument("--api", choices=("chat", "completions"), default="chat")
    ap.add_argument("--model", required=True)
    ap.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="closed loop: comma-separated concurrencies, one phase each",
    )
    ap.add_argument(
        "--request-rate",
        type=float,
        default=None,
        help="open loop: Poisson arrivals at this many requests/s (0: all at once)",
    )
    ap.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        help="open loop: at most this many in flight; the rest wait in the client",
    )
    ap.add_argument("--num-prompts", type=int, default=100, help="requests per phase")
    ap.add_argument("--input-len", type=int, default=128, help="prompt length in words")
    ap.add_argument("--output-len", type=int, default=128, help="max_tokens (with ignore_eos)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0, help="requests sent first and marked warmup")
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument(
        "--spec-counters",
        action="store_true",
        help="snapshot the server's /metrics and /get_server_info before and after each phase",
    )
    ap.add_argument(
        "--dataset",
        choices=("random", "sharegpt", "jsonl", "prefix", "multiturn", "trace"),
        default="random",
    )
    ap.add_argument("--dataset-path", default=None, help="sharegpt/jsonl file on this host")
    ap.add_argument("--range-ratio", type=float, default=0.0, help="lengths in L*(1±r)")
    ap.add_argument("--prefix-len", type=int, default=256, help="prefix: shared prefix length")
    ap.add_argument("--prefix-groups", type=int, default=4, help="prefix: number of groups")
    ap.add_argument("--turns", type=int, default=3, help="multiturn: turns per conversation")
    ap.add_argument(
        "--block-size", type=int, default=512, help="trace: tokens (or words) per hash id"
    )
    ap.add_argument(
        "--tokenizer",
        default=None,
        help="folder with tokenizer.json; 'auto': the folder /v1/models names as the model's "
        "root, when it lies inside --roots",
    )
    ap.add_argument("--roots", default="", help="auto tokenizer: allowed folders, comma-separated")
    ap.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson)")
    ap.add_argument(
        "--ramp-up",
        type=lambda s: [float(x) for x in s.split(",")],
        default=None,
        help="FROM,TO: the rate moves linearly from FROM to TO req/s over the run",
    )
    ap.add_argument("--duration", type=float, default=None, help="stop sending after S seconds")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false")
    ap.add_argument("--extra-body", default=None, help="JSON object merged into each body")
    ap.add_argument("--label", default=None, help="a name for this run, kept in the header")
    ap.add_argument(
        "--no-uvloop", action="store_true", help="use asyncio's own loop even if uvloop is here"
    )
    ap.add_argument("--out", default=None, help="JSONL file; default: a new file under /tmp")
    ap.add_argument("--traceparent", default=None, help="W3C trace context sent on each request")
    return checked(ap, ap.parse_args(argv))


def checked(ap: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """The arguments that depend on each other, checked (and a ramp's first rate filled in)."""
    replay = args.dataset == "trace" and args.concurrency is None and args.request_rate is None
    one_mode = (args.concurrency is None) != (args.request_rate is None)
    if not one_mode and not args.ramp_up and not replay:
        ap.error("give exactly one of --concurrency and --request-rate")
    if args.dataset == "trace" and not (SECRETS.get("trace") or {}).get("rows"):
        ap.error("--dataset trace takes its rows on stdin from Sleuth (sleuth bench --trace FILE)")
    if args.dataset in ("sharegpt", "jsonl") and not args.dataset_path:
        ap.error(f"--dataset {args.dataset} needs --dataset-path FILE")
    if args.ramp_up is not None and len(args.ramp_up) != 2:
        ap.error("--ramp-up takes FROM,TO")
    if args.ramp_up is not None and args.request_rate is None:
        args.request_rate = args.ramp_up[0]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.out is None:
        fd, args.out = tempfile.mkstemp(prefix="sleuth-bench-", suffix=".jsonl", dir="/tmp")
        os.close(fd)
    runner = _runner(args.no_uvloop)
    args.tokenizer = find_tokenizer(args) if args.tokenizer == "auto" else args.tokenizer
    tokens = Tokens(args.tokenizer) if args.tokenizer else None
    with open(args.out, "w", encoding="utf-8") as out:
        sent = runner(LoadGen(args, tokens).run(out))
    sys.stdout.write(json.dumps({"out": args.out, "requests": sent}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
