"""Large byte ranges over SFTP: Sleuth's `read_range` against paramiko's own `SFTPFile.readv`.

    python -m benchmarks.sftp_ranges [--repeat 3] [--out benchmarks/results/sftp_ranges.md]

Starts a throwaway sshd (tests/sshd.py) on 127.0.0.1 and reads ranges of 1, 16 and 64 MiB
from one file both ways over the same transport: Sleuth's reader (`sleuth/hosts/ssh/
sftp_read.py`, requests sent and collected by the calling thread, 64 in flight) and
paramiko's readv (requests sent by a second thread). Each size is read once on an idle
interpreter and once while two threads spin (a busy agent: tool calls, rendering, other
hosts), and the bytes that crossed the wire are counted against the range.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import paramiko

from benchmarks import write_results
from benchmarks.ssh_calls import connect
from sleuth.hosts.ssh import SSHHost
from tests.sshd import SSHServer, missing_reason

MIB = 1 << 20
SIZES = (1, 16, 64)
SPINNERS = 2


@contextmanager
def busy(spinners: int) -> Iterator[None]:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    threads = [threading.Thread(target=spin) for _ in range(spinners)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def paramiko_readv(client: paramiko.SFTPClient, path: str, length: int) -> bytes:
    with client.open(path, "rb") as fh:
        return b"".join(fh.readv([(0, length)]))


def measure(host: SSHHost, path: Path, data: bytes, repeat: int) -> list[dict[str, object]]:
    # One client each way, opened before timing: Sleuth's from its pool, paramiko's here.
    client = paramiko.SFTPClient.from_transport(host.conn.live()[0])
    assert client is not None
    ways: dict[str, Callable[[int], bytes]] = {
        "Sleuth read_range": lambda n: host.read_range(str(path), 0, n),
        "paramiko readv": lambda n: paramiko_readv(client, str(path), n),
    }
    rows: list[dict[str, object]] = []
    for size in SIZES:
        length = size * MIB
        for load in (0, SPINNERS):
            row: dict[str, object] = {"size": size, "load": load}
            for way, call in ways.items():
                seconds, wire = [], []
                with busy(load):
                    for _ in range(repeat):
                        before, start = host.conn.bytes_received, time.perf_counter()
                        assert call(length) == data[:length], f"{way} returned other bytes"
                        seconds.append(time.perf_counter() - start)
                        wire.append((host.conn.bytes_received - before) / length)
                row[way] = (statistics.median(seconds), max(wire))
                print(f"{size} MiB, {load} spinning: {way} {row[way]}", file=sys.stderr)
            rows.append(row)
    client.close()
    return rows


def report(rows: list[dict[str, object]], repeat: int) -> str:
    lines = [
        "## Large ranges over SFTP (`benchmarks/sftp_ranges.py`)",
        "",
        f"Reproduce: `python -m benchmarks.sftp_ranges --repeat {repeat}` (starts an sshd on "
        "127.0.0.1).",
        "",
        "One range read from the start of a file on the same loopback transport, by Sleuth's",
        "reader (requests sent and collected by the calling thread, 64 in flight) and by",
        "paramiko's `SFTPFile.readv` (requests sent by a second thread). Median seconds of",
        f"{repeat} reads; wire is the most bytes received per byte of range in any of them.",
        f'"busy" reads while {SPINNERS} other Python threads spin, as a busy agent\'s would.',
        f"Load average {os.getloadavg()[0]:.1f} on this machine's {os.cpu_count()} cores when "
        "the run ended.",
        "",
        "| range | interpreter | Sleuth s | paramiko s | paramiko / Sleuth | Sleuth wire | "
        "paramiko wire |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        ours, theirs = row["Sleuth read_range"], row["paramiko readv"]
        assert isinstance(ours, tuple) and isinstance(theirs, tuple)
        load = "busy" if row["load"] else "idle"
        lines.append(
            f"| {row['size']} MiB | {load} | {ours[0]:.3f} | {theirs[0]:.3f} | "
            f"{theirs[0] / ours[0]:.1f}x | {ours[1]:.3f} | {theirs[1]:.3f} |"
        )
    lines += [
        "",
        "paramiko's second thread races the answers: when they outrun it, readv takes the",
        "prefetch for finished and reads the rest again with one request per 32 KiB",
        "(paramiko PR #2519), which is where both its time and its extra wire go.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="reads of each range each way")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results/sftp_ranges.md"),
        help="where the Markdown section goes",
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat takes 1 or more")
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        work = Path(tmp)
        data = os.urandom(max(SIZES) * MIB)
        path = work / "shard.bin"
        path.write_bytes(data)
        with SSHServer.create(work / "sshd", sftp=True) as server:
            host = connect(server, work, "exec")
            try:
                host.stat("/")
                rows = measure(host, path, data, args.repeat)
            finally:
                host.close()
    text = report(rows, args.repeat)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
