"""What a host without the SFTP subsystem costs: each file request over SFTP and over the
exec fallback (POSIX tools), on the same loopback sshd set up both ways.

    python -m benchmarks.no_sftp [--calls 100] [--out benchmarks/results/no_sftp.md]

Starts two throwaway sshds (tests/sshd.py), one with `Subsystem sftp` and one without, and
times `stat`, `realpath`, `read_range` of 4 KiB and of 1 MiB, and one `read_lines` tool call
(Sleuth's host program, run once per call) through SSHHost, with the bytes that crossed the wire
per 1 MiB read.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks import write_results
from benchmarks.ssh_calls import WARMUP, connect, median_ms, run_calls, table
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer, missing_reason

MIB = 1 << 20


def timings(call: Callable[[], object], count: int) -> list[float]:
    return run_calls(call, count, 1)[0]


def measure(work: Path, calls: int) -> dict[str, dict[str, float]]:
    blob = work / "data" / "shard.bin"
    blob.parent.mkdir()
    blob.write_bytes(os.urandom(8 * MIB))
    source = work / "data" / "model.py"
    source.write_text("".join(f"line {i}: some source text\n" for i in range(1, 101)))
    got: dict[str, dict[str, float]] = {}
    for access, with_sftp in (("sftp", True), ("exec", False)):
        with SSHServer.create(work / access, sftp=with_sftp) as server:
            got[access] = measure_one(connect(server, work, "exec"), access, blob, calls)
    return got


def measure_one(host: SSHHost, access: str, blob: Path, calls: int) -> dict[str, float]:
    host.stat("/")
    assert host.file_access == access
    row = {
        "stat": median_ms(timings(lambda: host.stat(str(blob)), calls)),
        "realpath": median_ms(timings(lambda: host.realpath(str(blob)), calls)),
        "read_4k": median_ms(timings(lambda: host.read_range(str(blob), 12_345, 4096), calls)),
        "read_1m": median_ms(
            timings(lambda: host.read_range(str(blob), 54_321, MIB), max(calls // 4, 10))
        ),
    }
    before = host.conn.bytes_received
    assert host.read_range(str(blob), 54_321, MIB) == blob.read_bytes()[54_321 : 54_321 + MIB]
    row["wire_1m"] = host.conn.bytes_received - before
    config = HostConfig(roots=[str(blob.parent)])
    ctx = ToolContext(hosts={"h": SandboxedHost("h", host, config, Limits())})
    args = {"host": "h", "path": "model.py", "start": 1, "end": 20}
    row["read_lines"] = median_ms(timings(lambda: execute(ctx, "read_lines", args), calls))
    host.close()
    return row


def report(got: dict[str, dict[str, float]], calls: int) -> str:
    sftp, exe = got["sftp"], got["exec"]
    rows = [
        [name, f"{sftp[key]:.2f}", f"{exe[key]:.2f}", f"{exe[key] / sftp[key]:.1f}x"]
        for name, key in [
            ("`stat`", "stat"),
            ("`realpath`", "realpath"),
            ("`read_range`, 4 KiB", "read_4k"),
            ("`read_range`, 1 MiB", "read_1m"),
            ("`read_lines` tool call (20 lines)", "read_lines"),
        ]
    ]
    rows.append(
        ["bytes received for a 1 MiB range", f"{sftp['wire_1m']:,.0f}", f"{exe['wire_1m']:,.0f}",
         f"{exe['wire_1m'] / sftp['wire_1m']:.2f}x"]
    )  # fmt: skip
    return f"""## Hosts without SFTP (`benchmarks/no_sftp.py`)

Reproduce: `python -m benchmarks.no_sftp --calls {calls}` (starts two sshds on 127.0.0.1).

The same loopback OpenSSH server, once with `Subsystem sftp` and once without (as hardened
hosts run). Median ms per call over {calls} calls after {WARMUP} warm-up calls (a quarter as
many for 1 MiB reads), empty remote `~/.bashrc`; load average {os.getloadavg()[0]:.1f} on this
machine's 2 cores when the run ended.

{table(["call", "SFTP", "exec fallback", "exec / SFTP"], rows)}

Without SFTP each file request is one exec (`sh -c` running `stat -c`, `realpath`, or
`tail -c +N | head -c L`), so it pays a channel, a login shell and a process; a host whose
start-up files are slow pays that too (see the section above). Range reads stay byte-exact:
only the range crosses the wire. A `read_lines` call reads through Sleuth's program on the
host, started once per call here (`calls = "exec"`), so SFTP does not enter it: both columns
pay the host's Python start-up (the resident program spares it; see the section above).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/no_sftp.md"))
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        got = measure(Path(tmp), args.calls)
    text = report(got, args.calls)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
