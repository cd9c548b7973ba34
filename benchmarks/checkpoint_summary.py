"""checkpoint_summary on a 371k-tensor sparse MoE: local, loopback SSH, a 50 ms link, and SFTP.

`python -m benchmarks.checkpoint_summary` writes benchmarks/results/checkpoint_summary.md.
The 50 ms link is an asyncio TCP proxy on 127.0.0.1 in front of the test sshd that
holds every chunk 25 ms in each direction (tc netem is not available here).
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors import safe_open

from benchmarks import write_results
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx
from tests.sshd import SSHServer, free_port

RESULTS = Path(__file__).parent / "results" / "checkpoint_summary.md"
DELAY_S = 0.025


class DelayProxy:
    """127.0.0.1:port -> target, every chunk forwarded DELAY_S after it arrived, in order."""

    def __init__(self, target_port: int) -> None:
        self.target_port, self.port = target_port, free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.AbstractServer | None = None

    def start(self) -> None:
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        self.server = fut.result(5)

    async def _serve(self) -> asyncio.AbstractServer:
        return await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not data:
                    dst.close()
                    return
                dst.write(data)
                await dst.drain()

        sender = asyncio.ensure_future(send())
        while data := await src.read(1 << 16):
            queue.put_nowait((time.monotonic() + DELAY_S, data))
        queue.put_nowait((time.monotonic() + DELAY_S, b""))
        await sender

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _shutdown(self) -> None:
        if self.server is not None:
            self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


PREVIOUS_S = {
    "local (in-process)": 7.77,
    "loopback SSH, host python3": 5.30,
    "50 ms RTT link, host python3": 4.15,
    "loopback SSH, no python3 (SFTP)": 12.66,
    "50 ms RTT link, no python3 (SFTP)": 38.63,
    "baseline: safe_open keys over every shard (local)": 1.33,
}
"""Seconds measured at commit 5132de3, before the speed work (another, busier run)."""


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (the local probe and its forks)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float, Any]:
    """Median wall seconds, median CPU seconds (see cpu_s) and the last result."""
    spent, cpu, out = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), cpu_s()
        out = fn()
        spent.append(time.perf_counter() - start)
        cpu.append(cpu_s() - start_cpu)
    return statistics.median(spent), statistics.median(cpu), out


def safe_open_keys(folder: Path) -> int:
    count = 0
    for shard in sorted(folder.glob("*.safetensors")):
        with safe_open(str(shard), framework="np") as f:
            count += len(f.keys())
    return count


def ssh_context(
    config_path: Path, work: Path, folder: Path, target: str, known: Path, python: str = "python3"
) -> tuple[ToolContext, SSHHost]:
    host = SSHHost(
        "remote",
        target,
        known_hosts=work / "kh",
        ssh_config_path=config_path,
        user_known_hosts=known,
    )
    config = HostConfig(ssh=target, roots=[str(folder.parent)], python=python)
    return ToolContext(hosts={"remote": SandboxedHost("remote", host, config, Limits())}), host


def summarize(ctx: ToolContext, host: str, folder: Path) -> dict[str, Any]:
    result = execute(ctx, "checkpoint_summary", {"host": host, "model_dir": str(folder)})
    assert result.ok, result.error
    data: dict[str, Any] = result.data
    return data


def measure(work: Path) -> list[dict[str, Any]]:
    folder = work / "qwen397b-nvfp4"
    start = time.perf_counter()
    fx.big_moe(folder)
    build_s = time.perf_counter() - start
    rows: list[dict[str, Any]] = []
    keys_s, keys_cpu, keys = timed(lambda: safe_open_keys(folder), 3)
    local = ToolContext(
        hosts={
            "local": SandboxedHost("local", LocalHost(), HostConfig(roots=[str(work)]), Limits())
        }
    )
    secs, cpu, data = timed(lambda: summarize(local, "local", folder), 3)
    rows.append({"way": "local", "s": secs, "cpu": cpu, "data": data, "wire": None})
    # The baseline again, right after, so both saw the same load on the shared machine.
    again_s, again_cpu, _ = timed(lambda: safe_open_keys(folder), 3)
    keys_s, keys_cpu = min(keys_s, again_s), min(keys_cpu, again_cpu)
    server = SSHServer.create(work / "sshd")
    proxy = DelayProxy(server.port)
    proxy.start()
    try:
        slow_known = work / "known_slow"
        line = server.known_hosts_path.read_text().replace(f"]:{server.port} ", f"]:{proxy.port} ")
        slow_known.write_text(line)
        slow_config = work / "ssh_config_slow"
        slow_config.write_text(
            server.ssh_config_path.read_text()
            .replace(server.alias, "sleuth-slow")
            .replace(f"Port {server.port}", f"Port {proxy.port}")
        )
        ways = [
            ("loopback SSH, host python3", server.alias, server.known_hosts_path, "python3"),
            ("50 ms RTT link, host python3", "sleuth-slow", slow_known, "python3"),
            (
                "loopback SSH, no python3 (SFTP)",
                server.alias,
                server.known_hosts_path,
                "no-such-python3",
            ),
            ("50 ms RTT link, no python3 (SFTP)", "sleuth-slow", slow_known, "no-such-python3"),
        ]
        for way, target, known, python in ways:
            config_path = slow_config if target == "sleuth-slow" else server.ssh_config_path
            ctx, host = ssh_context(config_path, work, folder, target, known, python)
            host.stat("/")  # connect outside the timing
            before = host.conn.bytes_received
            runs = 1 if "SFTP" in way and "50 ms" in way else 3
            secs, cpu, data = timed(lambda c=ctx: summarize(c, "remote", folder), runs)
            wire = (host.conn.bytes_received - before) // runs
            rows.append({"way": way, "s": secs, "cpu": cpu, "data": data, "wire": wire})
            host.close()
    finally:
        proxy.stop()
        server.stop()
    rows.append(
        {
            "way": "baseline: safe_open keys over every shard (local)",
            "s": keys_s,
            "cpu": keys_cpu,
            "data": {"tensor_count": keys},
            "wire": None,
        }
    )
    rows.append(
        {
            "way": "building the sparse checkpoint (once)",
            "s": build_s,
            "cpu": None,
            "data": {},
            "wire": None,
        }
    )
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    first = rows[0]["data"]
    lines = [
        "## checkpoint_summary (issue 3)",
        "",
        f"Sparse Qwen3.5-397B-like NVFP4 MoE: {first['tensor_count']:,} tensors, "
        f"{first['shards']['count']} shards, "
        f"{first['shards']['file_bytes'] / 1e9:.0f} GB apparent, "
        f"{first['params']['logical'] / 1e9:.1f}B logical params. Median of 3 runs (1 for the "
        f"slow-link SFTP path), on a {os.cpu_count()}-core machine shared with other work "
        f"(load average {os.getloadavg()[0]:.1f} at the end).",
        "",
        "| way | time | CPU | before | bytes read on host | bytes over the wire | via |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        d = r["data"]
        host_bytes = f"{d['bytes_read_on_host']:,}" if "bytes_read_on_host" in d else "-"
        wire = "-" if r["wire"] is None else f"{r['wire']:,}"
        cpu = "-" if r["cpu"] is None else f"{r['cpu']:.2f} s"
        before = PREVIOUS_S.get(r["way"], PREVIOUS_S.get(f"{r['way']} (in-process)"))
        was = "-" if before is None else f"{before:.2f} s"
        lines.append(
            f"| {r['way']} | {r['s']:.2f} s | {cpu} | {was} | {host_bytes} | {wire} "
            f"| {d.get('via', '-')} |"
        )
    lines += [
        "",
        "Bytes read on the host = configs + index + (8 + header length) per shard; "
        "no tensor data. Wire bytes count everything the client received on the SSH "
        "connection (for host-python: the program's output and SSH framing; the ~35 KB "
        "program itself travels the other way). CPU is this process and its waited-for "
        "children: for `local` that includes the probe process and its forked workers; over "
        "SSH it is the client side only (the host's python3 runs under sshd).",
        "",
        "Where the time went before, and what changed (same output, checked byte for byte):",
        "",
        "- The cyclic GC rescanned ~10^6 parsed header objects again and again: paused while "
        "the probe runs (orjson parsing of the 50 headers: 1.2 s -> 0.3 s CPU).",
        "- One regex split per name (0.9-1.4 s): names of a shard are joined once and turned "
        "into templates and number columns with bytes.translate/split; numbers become ints "
        "per distinct value, not per tensor.",
        "- Offsets are checked with whole-column C operations (map/set/sorted, lazy pairwise "
        "compares); the per-tensor walk runs only to explain a bad header.",
        "- Each shard's per-tensor dicts are grouped and dropped as it is read (peak memory "
        "580 MB -> 216 MB), and header names are checked against the already-parsed index.",
        "- The probe runs as its own process locally too, and forks workers over the shards "
        "(a 2-core machine under load from other work gains little from them; a GPU host "
        "with many cores gains more).",
        "- Locally the workers start on the shards found on disk (only those whose quoted "
        "name is in the raw index text) while the index is still being parsed, pulling shard "
        "numbers from one pipe with this process, so the index parse overlaps header work; "
        "contiguity is one list comparison of starts against ends; LocalHost.run waits "
        "blocking with a timer kill instead of Popen's 50 ms polling.",
        "- SFTP: a small pool of SFTP clients on the one connection (extra ones borrow free "
        "exec slots, within sshd's MaxSessions) lets the 16 reader threads overlap. Each "
        "thread sends and collects its own range's requests (sleuth/hosts/ssh/sftp_read.py); "
        "paramiko's readv, used before, raced its own prefetch thread and read much of the "
        "headers twice: 11.04 s, 10.96 s CPU and 132,503,130 bytes over the wire on "
        "loopback, 12.79 s on the 50 ms link.",
        "- Headers in the form every writer emits (compact JSON, printable ASCII names, no "
        "escapes) are read without a JSON parser: the separators become marker bytes, one "
        "split gives the name, dtype+shape and offsets columns, and the offsets are proven "
        "by recomputing them from the shapes; any other form goes through orjson and the "
        "per-tensor checks, with the same errors. Grouping maps defaultdict lookups over the "
        "columns; the index's one-shard-per-name proof spares hashing every group member. "
        "Workers stream each shard back as it is done. 10 back-to-back local runs: median "
        "1.17 s (1.11-1.33), CPU 1.81 s before; 0.89 s (0.87-0.94), CPU 1.46 s after; the "
        "summary's single-process CPU 1.40 s -> 1.09 s. This VM's speed drifts by ~25% "
        "within minutes.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = report(measure(Path(tmp)))
    write_results(RESULTS, text)


if __name__ == "__main__":
    main()
