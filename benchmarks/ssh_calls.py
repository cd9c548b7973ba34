"""What one small remote read costs: Sleuth's resident host program against every other way.

    python -m benchmarks.ssh_calls [--calls 200] [--out benchmarks/results/ssh_calls.md]

Starts two throwaway sshds (tests/sshd.py) on 127.0.0.1, one whose login shell reads an empty
`~/.bashrc` and one whose `~/.bashrc` is `sleep 0.1` (a typical conda or module set-up costs
about that; it also logs each start, so shells are counted), and times the same small read
(the first 4 KiB, 20 lines, of a file) six ways, one call at a time and 16 at once, in one run:

- Sleuth's program resident on the host: one request over the connection's one channel;
- the same through the `read_lines` tool (resolve, binary check, lines, secret scan);
- Sleuth's program run once per call over exec (the exec path, where the host has Python);
- POSIX tools over exec, as `read_lines` ran before the program (`sh -c 'cut | sed'`);
- raw paramiko exec of `cat FILE` on the same transport (no Sleuth at all);
- `ssh` with OpenSSH ControlMaster multiplexing, `cat FILE` per call.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks import write_results
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.posix_files import READ_LINES_SCRIPT
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer, missing_reason

WARMUP = 10
CONCURRENCY = (1, 16)
SHELLS = ("empty", "sleep 0.1")
"""The two servers' `~/.bashrc`: empty, and `sleep 0.1` (which also appends a line to a log,
so that the login shells each way starts are counted)."""
SLOW_SHARE = 5
"""Rows that pay the 100 ms start-up file per call run a fifth of the calls."""


@dataclass
class Row:
    how: str
    shell: str
    concurrency: int
    median_ms: float
    p90_ms: float
    per_s: float
    shells: int | None
    """Login shells started, warm-up included; None where they were not counted."""


def run_calls(call: Callable[[], object], count: int, workers: int) -> tuple[list[float], float]:
    """Each call's latency and the calls per second, `workers` calls in flight at once."""
    for _ in range(min(WARMUP, count)):
        call()
    spent: list[float] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        start = time.perf_counter()
        call()
        took = time.perf_counter() - start
        with lock:
            spent.append(took)

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))
    return spent, count / (time.perf_counter() - start)


def connect(server: SSHServer, work: Path, calls: str) -> SSHHost:
    return SSHHost(
        f"bench-{calls}",
        server.alias,
        known_hosts=work / "sleuth_known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
        calls=calls,  # type: ignore[arg-type]
    )


def sandbox(host: SSHHost, root: Path) -> SandboxedHost:
    return SandboxedHost(host.name, host, HostConfig(roots=[str(root)]), Limits())


def raw_exec(host: SSHHost, path: Path) -> Callable[[], bytes]:
    """`cat FILE` on a bare paramiko channel of the same transport: no wrapper, no caps."""
    command = f"cat {shlex.quote(str(path))}"

    def call() -> bytes:
        channel = host.transport().open_session()
        try:
            channel.exec_command(command)
            parts = []
            while chunk := channel.recv(1 << 16):
                parts.append(chunk)
            channel.recv_exit_status()
            return b"".join(parts)
        finally:
            channel.close()

    return call


def ssh_cli(server: SSHServer, control: Path, path: Path) -> Callable[[], object]:
    command = [
        "ssh", "-F", str(server.ssh_config_path), "-o", f"ControlPath={control}",
        server.alias, f"cat {shlex.quote(str(path))}",
    ]  # fmt: skip

    def call() -> object:
        return subprocess.run(command, check=True, capture_output=True)

    return call


def start_master(server: SSHServer, control: Path) -> None:
    subprocess.run(
        ["ssh", "-F", str(server.ssh_config_path), "-o", "ControlMaster=auto",
         "-o", f"ControlPath={control}", "-o", "ControlPersist=300", "-fN", server.alias],
        check=True,
    )  # fmt: skip


def stop_master(server: SSHServer, control: Path) -> None:
    subprocess.run(
        ["ssh", "-F", str(server.ssh_config_path), "-o", f"ControlPath={control}",
         "-O", "exit", server.alias],
        capture_output=True,
    )  # fmt: skip


@dataclass
class Way:
    call: Callable[[], object]
    per_call_shell: bool
    """Whether each call starts a login shell (and so reads `~/.bashrc`)."""


@contextmanager
def ways(server: SSHServer, work: Path, root: Path, target: Path) -> Iterator[dict[str, Way]]:
    """Every way to read the file, each checked first to read what is there."""
    resident, once = connect(server, work, "resident"), connect(server, work, "exec")
    rooted, per_call = sandbox(resident, root), sandbox(once, root)
    ctx = ToolContext(hosts={"remote": rooted})
    lines = ["sh", "-c", READ_LINES_SCRIPT, "sleuth-read-lines", "4097", str(target), "1", "20"]
    tool_call = {"host": "remote", "path": str(target), "end": 20}
    control = work / "cm.sock"
    start_master(server, control)
    try:
        head = target.read_bytes()[:4096]
        assert rooted.files.read_range(str(target), 0, 4096) == head
        assert per_call.files.read_range(str(target), 0, 4096) == head
        assert raw_exec(resident, target)() == target.read_bytes()
        assert execute(ctx, "read_lines", tool_call).ok
        yield {
            "Sleuth's program, resident: one read request": Way(
                lambda: rooted.files.read_range(str(target), 0, 4096), False
            ),
            "Sleuth's program, resident: the `read_lines` tool": Way(
                lambda: execute(ctx, "read_lines", tool_call), False
            ),
            "Sleuth's program once per call (the exec path)": Way(
                lambda: per_call.files.read_range(str(target), 0, 4096), True
            ),
            "POSIX tools over exec (`sh -c 'cut | sed'`, as before)": Way(
                lambda: resident.run(lines, timeout=30, max_bytes=64_000), True
            ),
            "raw paramiko exec `cat`": Way(raw_exec(resident, target), True),
            "`ssh` ControlMaster `cat`": Way(ssh_cli(server, control, target), True),
        }
    finally:
        stop_master(server, control)
        resident.close()
        once.close()


def measure(work: Path, calls: int) -> list[Row]:
    root = work / "root"
    root.mkdir()
    target = root / "model.py"
    target.write_text("".join(f"line {i}: some source text of the model\n" for i in range(1, 101)))
    rows: list[Row] = []
    for n, shell in enumerate(SHELLS):
        with SSHServer.create(work / f"sshd{n}") as server:
            log = server.home / "shells.log"
            log.touch()
            if shell != "empty":
                (server.home / ".bashrc").write_text(f'echo >> "{log}"\n{shell}\n')
            with ways(server, server.dir, root, target) as found:
                for how, way in found.items():
                    slow = shell != "empty" and way.per_call_shell
                    count = max(calls // SLOW_SHARE, 32) if slow else calls
                    for workers in CONCURRENCY:
                        before = log.read_text().count("\n")
                        spent, per_s = run_calls(way.call, count, workers)
                        shells = log.read_text().count("\n") - before
                        row = Row(
                            how, shell, workers, median_ms(spent), p90_ms(spent), per_s,
                            None if shell == "empty" else shells,
                        )  # fmt: skip
                        rows.append(row)
                        print(f"{shell:>9} {workers:>2} in flight {row.median_ms:8.2f} ms  {how}")
    return rows


def median_ms(spent: list[float]) -> float:
    return statistics.median(spent) * 1000


def p90_ms(spent: list[float]) -> float:
    return statistics.quantiles(spent, n=10)[8] * 1000


def table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def pick(rows: list[Row], how: str, shell: str, concurrency: int) -> Row:
    return next(
        r
        for r in rows
        if r.how.startswith(how) and r.shell == shell and r.concurrency == concurrency
    )


def report(rows: list[Row], calls: int, machine: str) -> str:
    resident = "Sleuth's program, resident: one"
    cm = "`ssh` ControlMaster"
    ratio = pick(rows, resident, "empty", 1).median_ms / pick(rows, cm, "empty", 1).median_ms
    slow = {c: pick(rows, resident, "sleep 0.1", c) for c in CONCURRENCY}
    added = {c: slow[c].median_ms - pick(rows, resident, "empty", c).median_ms for c in slow}
    shells = sum(r.shells or 0 for r in slow.values())
    tool = pick(rows, "Sleuth's program, resident: the", "empty", 1).median_ms
    tool_ratio = tool / pick(rows, cm, "empty", 1).median_ms

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    matrix = table(
        ["how", "`~/.bashrc`", "in flight", "median ms/call", "p90 ms/call", "calls/s",
         "login shells"],
        [
            [r.how, r.shell, str(r.concurrency), f"{r.median_ms:.2f}", f"{r.p90_ms:.2f}",
             f"{r.per_s:.0f}", "-" if r.shells is None else str(r.shells)]
            for r in rows
        ],
    )  # fmt: skip
    targets = table(
        ["target", "measured", "verdict"],
        [
            ["resident read ≤ 0.2x a ControlMaster `cat`, per call", f"{ratio:.3f}x",
             verdict(ratio <= 0.2)],
            ["a 100 ms `~/.bashrc` starts no shell per resident call",
             f"{shells} shells in {2 * (calls + WARMUP)} calls", verdict(shells == 0)],
            ["... and adds under 1 ms per call, one in flight", f"{added[1]:+.2f} ms",
             verdict(added[1] < 1.0)],
        ],
    )  # fmt: skip
    return f"""## SSH calls (`benchmarks/ssh_calls.py`)

Reproduce: `python -m benchmarks.ssh_calls --calls {calls}` (starts its own sshds on 127.0.0.1).
Measured on {machine}.

The same small read (the first 4 KiB, 20 lines, of a source file) against throwaway OpenSSH
servers on loopback, {calls} calls per row after {WARMUP} warm-up calls (a fifth of them, at
least 32, for the rows that pay a 100 ms start-up file each call), one at a time and 16 in
flight, all in one run. One server's login shell reads an empty `~/.bashrc`, the other's
`sleep 0.1` (and appends a line to a log, so the shells each way starts are counted).
Sleuth's resident program starts once per connection, before the rows; every other way
starts a login shell per call.

{matrix}

{targets}

The resident program answers a request in about the time the link takes to carry it: no
channel to open, no shell, no interpreter to start, and the 100 ms start-up file was paid once
for the connection. With 16 in flight the resident read's median moved by
{added[16]:+.2f} ms between the two servers, with no shell started: that is this shared
machine's noise, not the start-up file. The `read_lines` tool makes four requests (resolve,
the binary check, the lines, the by-key secret scan) and still comes to {tool:.2f} ms,
{tool_ratio:.2f}x a ControlMaster `cat`. The exec path starts a login shell and a Python per
call, so it costs more than the POSIX tools it replaces; it is the fallback for a host where
the program cannot stay resident, and it keeps the roots under a race as the resident program
does (SECURITY.md).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ssh_calls.md"))
    parser.add_argument(
        "--machine", default=f"{os.cpu_count()} cores, loopback only", help="said in the results"
    )
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        rows = measure(Path(tmp), args.calls)
    text = report(rows, args.calls, args.machine)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
