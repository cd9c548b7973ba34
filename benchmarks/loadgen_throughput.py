"""How many chunks/s one load generator process sustains on one core before it flags itself.

A stepping server (below) runs in another process, pinned to core 1 where there is
one: like an engine's decode step, every ITL ms it writes the next one-token chunk to
every open stream, one socket write each, so that each chunk reaches the client in a
read of its own. (tests/streaming_server.py, one coroutine and timer per stream, cannot
keep that pace past about 20k chunks/s on one shared core; it falls behind and sends
chunks in bunches, which makes the client look cheaper than it is.) The load generator
(the program run_benchmark sends) is pinned to core 0 with os.sched_setaffinity.
Concurrency rises until the client reports itself client-limited, once with uvloop
(when it is installed) and once with asyncio's own loop. Each row gives the client's
CPU time (time.process_time) per wall second and per chunk received. Writes a
Markdown section:

    python benchmarks/loadgen_throughput.py [--out benchmarks/results/loadgen.md] [--realtime]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_support import free_port, realtime_prefix  # noqa: E402

from sleuth.hosts.program import program  # noqa: E402
from sleuth.tools.bench.metrics import summarise  # noqa: E402

ITL_MS = 2.0
TOKENS = 1000
LEVELS = (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128, 160, 192)
CLIENT_CPU, SERVER_CPU = 0, 1
ATTEMPTS = 3

Row = dict[str, float | bool | str]


def has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def pinned(cpu: int) -> Any:
    """A preexec_fn pinning the child to `cpu`, when this machine has it and another."""
    cpus = os.sched_getaffinity(0)
    if cpu not in cpus or len(cpus) < 2:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def pin_prefix(cpu: int) -> list[str]:
    cpus = os.sched_getaffinity(0)
    return ["taskset", "-c", str(cpu)] if cpu in cpus and len(cpus) > 1 else []


# Runs the program read from stdin with uvloop unimportable: the same switch for any
# version of the load generator, so an older one can be measured the same way.
WITHOUT_UVLOOP = (
    "import sys; sys.modules['uvloop'] = None; exec(compile(sys.stdin.read(), 'loadgen', 'exec'))"
)


def one_level(
    url: str, concurrency: int, tmp: Path, uvloop: bool, realtime: bool, source: bytes
) -> Row:
    out = tmp / f"c{concurrency}-{uvloop}.jsonl"
    argv = [
        *(realtime_prefix() if realtime else []),
        sys.executable,
        *(["-"] if uvloop else ["-c", WITHOUT_UVLOOP]),
        "--url",
        url,
        "--model",
        "fast",
        "--concurrency",
        str(concurrency),
        "--num-prompts",
        str(concurrency),
        "--output-len",
        str(TOKENS),
        "--input-len",
        "16",
        "--out",
        str(out),
    ]
    subprocess.run(
        argv,
        input=source,
        check=True,
        capture_output=True,
        timeout=300,
        preexec_fn=pinned(CLIENT_CPU),
    )
    lines = out.read_text().splitlines()
    report = summarise(lines)
    phase = report.phases[0]
    raw = next(json.loads(line) for line in lines if '"type":"phase"' in line)
    chunks = sum(len(json.loads(line)["chunk_t"]) for line in lines if '"type":"request"' in line)
    return {
        "loop": "uvloop" if uvloop else "asyncio",
        "concurrency": concurrency,
        "offered": concurrency * 1000.0 / ITL_MS,
        "chunks_per_s": chunks / phase.duration_s,
        "cpu_share": phase.client.cpu_share,
        "cpu_us_per_chunk": raw["cpu_s"] / max(chunks, 1) * 1e6,
        "loop_lag_p99_ms": phase.client.loop_lag.p99 or 0.0,
        "itl_p50_ms": phase.itl_chunk.p50 or 0.0,
        "itl_p99_ms": phase.itl_chunk.p99 or 0.0,
        "limited": phase.client.client_limited,
        "reasons": "; ".join(phase.client.reasons),
    }


def frames(model: str, total: int) -> list[bytes]:
    """The chunked-encoding frames of one stream: a content chunk per token, then usage."""

    def part(obj: dict[str, Any]) -> bytes:
        data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    out = []
    for i in range(total):
        choice = {
            "index": 0,
            "delta": {"content": f" w{i}"},
            "finish_reason": "length" if i == total - 1 else None,
        }
        out.append(
            part(
                {
                    "id": "cmpl-x",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [choice],
                }
            )
        )
    usage = {"prompt_tokens": 16, "completion_tokens": total, "total_tokens": 16 + total}
    tail = part(
        {
            "id": "cmpl-x",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [],
            "usage": usage,
        }
    )
    out.append(tail + part_raw(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    return out


def part_raw(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


async def serve_stepping(port: int) -> None:
    """Every ITL ms, write each open stream's next chunk (see the module's docstring)."""
    loop = asyncio.get_running_loop()
    streams: list[list[Any]] = []  # [transport, next frame, frames]
    cache: dict[int, list[bytes]] = {}

    class Conn(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while (end := self.buf.find(b"\r\n\r\n")) >= 0:
                length = 0
                for line in self.buf[:end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if len(self.buf) < end + 4 + length:
                    return
                body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
                total = int(json.loads(body).get("max_tokens") or TOKENS)
                if total not in cache:
                    cache[total] = frames("fast", total)
                self.transport.write(HEAD)  # type: ignore[attr-defined]
                streams.append([self.transport, 0, cache[total]])

    server = await loop.create_server(Conn, "127.0.0.1", port)
    due = loop.time()
    while True:
        due += ITL_MS / 1000.0
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        finished = False
        for stream in streams:
            transport, i, parts = stream
            if transport.is_closing():
                stream[1] = len(parts)
            else:
                transport.write(parts[i])
                stream[1] = i + 1
            finished |= stream[1] == len(parts)
        if finished:
            streams[:] = [st for st in streams if st[1] < len(st[2])]
    server.close()


@contextlib.contextmanager
def stepping_server(realtime: bool) -> Iterator[str]:
    port = free_port()
    argv = [
        *(realtime_prefix() if realtime else []),
        sys.executable,
        __file__,
        "--serve",
        str(port),
    ]
    proc = subprocess.Popen(argv, preexec_fn=pinned(SERVER_CPU))
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the stepping server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# The load generator's own per-chunk work (read loop, parse, record), without the
# socket, event loop or aiohttp: fed frames from memory, in a fresh interpreter per
# version and JSON library. Prints microseconds per chunk, the best of 5 passes.
OWN_PATH = r"""
import asyncio, json, sys, time
if sys.argv[1] == "json":
    sys.modules["orjson"] = None
ns = {"__name__": "loadgen"}
exec(compile(sys.stdin.read(), "loadgen", "exec"), ns)
N = 50000
def frame(i):
    choice = {"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}
    obj = {"id": "cmpl-x", "object": "chat.completion.chunk", "model": "fast", "choices": [choice]}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
frames = [frame(i) for i in range(N)] + [b"data: [DONE]\n\n"]
class Content:
    def __init__(self): self.i = 0
    async def readany(self):
        self.i += 1
        return frames[self.i - 1] if self.i <= len(frames) else b""
    async def iter_any(self):
        for f in frames: yield f
class Resp:
    def __init__(self): self.content = Content()
def record():
    keys = ("t_first", "t_first_content", "usage", "finish_reason", "error")
    return {**dict.fromkeys(keys), "chunk_t": [], "chunk_n": [], "tokens_estimated": False}
async def main():
    best = 1.0
    for _ in range(5):
        req = ns["Request"](b"", record())
        t = time.process_time()
        await ns["LoadGen"].read_stream(Resp(), req)
        best = min(best, (time.process_time() - t) / N)
    print(best * 1e6)
asyncio.run(main())
"""


def own_path_us(source: bytes, json_lib: str) -> float:
    argv = [sys.executable, "-c", OWN_PATH, json_lib]
    done = subprocess.run(
        argv, input=source, check=True, capture_output=True, preexec_fn=pinned(CLIENT_CPU)
    )
    return float(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/loadgen.md")
    ap.add_argument(
        "--realtime",
        action="store_true",
        help="run the client under chrt -f 10, so other work on a shared box cannot preempt it",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        metavar="REV",
        help="also measure the load generator as it was at this git revision, for comparison",
    )
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        asyncio.run(serve_stepping(args.serve))
        return
    sources = {"this version": program("loadgen.py")}
    if args.baseline:
        sources[f"baseline {args.baseline}"] = subprocess.run(
            ["git", "show", f"{args.baseline}:sleuth/hosts/program/loadgen.py"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
    loops = [True, False] if has_uvloop() else [False]
    configs = [(version, source, uvloop) for version, source in sources.items() for uvloop in loops]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, stepping_server(args.realtime) as url:
        # Level by level, every version and loop in turn, so that the load other work
        # puts on this machine at any moment falls on all of them alike.
        for level in LEVELS:
            for config in list(configs):
                version, source, uvloop = config
                row = one_level_retried(url, level, Path(tmp), uvloop, args.realtime, source)
                row["version"] = version
                rows.append(row)
                print(json.dumps(row), flush=True)
                if row["limited"]:
                    configs.remove(config)
            if not configs:
                break
    own = {
        (version, lib): own_path_us(source, lib)
        for version, source in sources.items()
        for lib in ("orjson", "json")
    }
    write(args.out, rows, args, own)


def one_level_retried(
    url: str, level: int, tmp: Path, uvloop: bool, realtime: bool, source: bytes
) -> Row:
    # A shared box preempts the client now and then, which the loop-lag check rightly
    # flags; a level counts as flagged only if it is flagged every time.
    for attempt in range(1, ATTEMPTS + 1):
        row = one_level(url, level, tmp, uvloop, realtime, source)
        row["attempts"] = attempt
        if not row["limited"]:
            break
    return row


def best(rows: list[Row]) -> float:
    return max((float(r["chunks_per_s"]) for r in rows if not r["limited"]), default=0.0)


def write(
    path: Path, rows: list[Row], args: argparse.Namespace, own: dict[tuple[str, str], float]
) -> None:
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((str(r["version"]), str(r["loop"])), []).append(r)
    command = "python benchmarks/loadgen_throughput.py" + (" --realtime" if args.realtime else "")
    if args.baseline:
        command += f" --baseline {args.baseline}"
    lines = [
        "## Load generator throughput (benchmark of the benchmark)",
        "",
        f"`{command}`, {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), shared with "
        f"other work. Client pinned to core {CLIENT_CPU} (os.sched_setaffinity)"
        f"{', both processes under chrt -f 10' if args.realtime else ''}, stepping server "
        f"on core {SERVER_CPU}: one-token chunks every {ITL_MS:g} ms per stream, {TOKENS} per "
        "request. Client CPU is time.process_time over the phase's wall time; CPU µs/chunk "
        "is that time over chunks received, the client's whole cost per chunk (kernel "
        "receive, event loop, aiohttp, our parsing). A level is retried up to "
        f"{ATTEMPTS} times when flagged (attempts column); the sweep stops at the first "
        "level flagged every time. Versions and loops take turns at each level, so the "
        "machine's changing load falls on all of them alike.",
        "",
        "Sustained without flagging itself (target ≥ 20,000 chunks/s):",
        "",
    ]
    lines += [f"- {v}, {loop}: **{best(g):,.0f} chunks/s**" for (v, loop), g in groups.items()]
    lines += [
        "",
        "The load generator's own work per chunk (read loop, parse, record; frames fed from "
        "memory, no socket, loop or aiohttp), best of 5 passes of 50,000 chunks:",
        "",
        "| version | orjson | json |",
        "|---|---:|---:|",
    ]
    for version in dict.fromkeys(v for v, _ in own):
        lines.append(
            f"| {version} | {own[(version, 'orjson')]:.2f} µs | {own[(version, 'json')]:.2f} µs |"
        )
    for (version, loop), group in groups.items():
        lines += [
            "",
            f"### {version}, {loop}",
            "",
            "| concurrency | offered chunks/s | received chunks/s | client CPU | CPU µs/chunk "
            "| loop lag p99 ms | ITL p50 / p99 ms | attempts | flagged |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| {r['concurrency']} | {float(r['offered']):,.0f} | "
            f"{float(r['chunks_per_s']):,.0f} | {float(r['cpu_share']):.0%} | "
            f"{float(r['cpu_us_per_chunk']):.1f} | {float(r['loop_lag_p99_ms']):.1f} | "
            f"{float(r['itl_p50_ms']):.2f} / {float(r['itl_p99_ms']):.2f} | {r['attempts']} | "
            f"{r['reasons'] or 'no'} |"
            for r in group
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
