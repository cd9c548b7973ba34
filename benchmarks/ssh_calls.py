"""What one remote call costs: SSHHost against the `ssh` CLI, and what SFTP saves.

    python -m benchmarks.ssh_calls [--calls 200] [--out benchmarks/results/ssh_calls.md]

Starts its own throwaway sshd (tests/sshd.py) on 127.0.0.1 and times the same
`read_lines` command (`sed -n 1,20p -- FILE`) three ways: through SSHHost (one
reused transport), through `ssh` with ControlMaster multiplexing, and through
`ssh` with a fresh connection per call. Then 8 concurrent SSHHost calls against
sequential ones, and the remote login shell's start-up cost (the real user's
~/.bashrc against an empty one) against SFTP calls that never start a shell.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sleuth.hosts.ssh import SSHHost
from tests.sshd import SSHServer, missing_reason

WARMUP = 10


def timings(call: Callable[[], object], count: int) -> list[float]:
    for _ in range(min(WARMUP, count)):
        call()
    spent = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        spent.append(time.perf_counter() - start)
    return spent


def median_ms(spent: list[float]) -> float:
    return statistics.median(spent) * 1000


def p90_ms(spent: list[float]) -> float:
    return statistics.quantiles(spent, n=10)[8] * 1000


def connect(server: SSHServer, work: Path) -> SSHHost:
    return SSHHost(
        "bench",
        server.alias,
        known_hosts=work / "sleuth_known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
    )


def ssh_cli(server: SSHServer, control: str, argv: list[str]) -> Callable[[], object]:
    command = [
        "ssh", "-F", str(server.ssh_config_path), "-o", f"ControlPath={control}",
        server.alias, shlex.join(argv),
    ]  # fmt: skip

    def call() -> object:
        return subprocess.run(command, check=True, capture_output=True)

    return call


def start_master(server: SSHServer, control: Path) -> None:
    subprocess.run(
        ["ssh", "-F", str(server.ssh_config_path), "-o", "ControlMaster=yes",
         "-o", f"ControlPath={control}", "-o", "ControlPersist=300", "-fN", server.alias],
        check=True,
    )  # fmt: skip


def stop_master(server: SSHServer, control: Path) -> None:
    subprocess.run(
        ["ssh", "-F", str(server.ssh_config_path), "-o", f"ControlPath={control}",
         "-O", "exit", server.alias],
        capture_output=True,
    )  # fmt: skip


def throughput(host: SSHHost, argv: list[str], count: int, workers: int) -> float:
    def one(_: int) -> object:
        return host.run(argv, timeout=30, max_bytes=64_000)

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))
    return count / (time.perf_counter() - start)


def measure(work: Path, calls: int) -> dict[str, float]:
    target = work / "model.py"
    target.write_text("".join(f"line {i}: some source text\n" for i in range(1, 101)))
    argv = ["sed", "-n", "1,20p", "--", str(target)]
    got: dict[str, float] = {}
    with SSHServer.create(work / "clean") as server:
        host = connect(server, work)
        run = lambda: host.run(argv, timeout=30, max_bytes=64_000)  # noqa: E731
        expected = host.run(argv, timeout=30, max_bytes=64_000).stdout
        assert expected.count(b"\n") == 20, expected
        spent = timings(run, calls)
        got |= {"sshhost_med": median_ms(spent), "sshhost_p90": p90_ms(spent)}
        got["seq_per_s"] = throughput(host, argv, calls, 1)
        got["conc_per_s"] = throughput(host, argv, calls, 8)
        spent = timings(lambda: host.run(["true"], timeout=30, max_bytes=100), calls)
        got["exec_clean_med"] = median_ms(spent)
        spent = timings(lambda: host.stat(str(target)), calls)
        got["sftp_stat_med"] = median_ms(spent)
        spent = timings(lambda: host.realpath(str(target)), calls)
        got["sftp_realpath_med"] = median_ms(spent)
        spent = timings(lambda: host.read_range(str(target), 0, 4096), calls)
        got["sftp_read_med"] = median_ms(spent)
        host.close()

        control = work / "cm.sock"
        start_master(server, control)
        try:
            spent = timings(ssh_cli(server, str(control), argv), calls)
        finally:
            stop_master(server, control)
        got |= {"cm_med": median_ms(spent), "cm_p90": p90_ms(spent)}
        spent = timings(ssh_cli(server, "none", argv), calls)
        got |= {"fresh_med": median_ms(spent), "fresh_p90": p90_ms(spent)}

    # The same server setup, but the login shell reads the real user's start-up files.
    with SSHServer.create(work / "real_home", clean_shell=False) as server:
        host = connect(server, work)
        spent = timings(lambda: host.run(["true"], timeout=30, max_bytes=100), max(calls // 4, 20))
        got["exec_real_med"] = median_ms(spent)
        spent = timings(lambda: host.stat(str(target)), max(calls // 4, 20))
        got["sftp_stat_real_med"] = median_ms(spent)
        host.close()
    return got


def table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def report(got: dict[str, float], calls: int) -> str:
    cm_ratio = got["sshhost_med"] / got["cm_med"]
    fresh_ratio = got["fresh_med"] / got["sshhost_med"]
    conc_ratio = got["conc_per_s"] / got["seq_per_s"]
    shell_cost = got["exec_real_med"] - got["exec_clean_med"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    def ms(key: str) -> str:
        return f"{got[key]:.2f}"

    per_call = table(
        ["how", "median ms/call", "p90 ms/call"],
        [
            ["SSHHost (one paramiko transport, TCP_NODELAY, a channel per call)",
             ms("sshhost_med"), ms("sshhost_p90")],
            ["`ssh` CLI, ControlMaster multiplexing", ms("cm_med"), ms("cm_p90")],
            ["`ssh` CLI, fresh connection per call", ms("fresh_med"), ms("fresh_p90")],
        ],
    )  # fmt: skip
    concurrency = f"{got['conc_per_s']:.0f}/s vs {got['seq_per_s']:.0f}/s = {conc_ratio:.2f}x"
    targets = table(
        ["target", "measured", "verdict"],
        [
            ["SSHHost ≤ 0.5x ControlMaster per call", f"{cm_ratio:.2f}x",
             verdict(cm_ratio <= 0.5)],
            ["SSHHost ≥ 30x faster than a fresh connection", f"{fresh_ratio:.1f}x",
             verdict(fresh_ratio >= 30)],
            ["8 concurrent ≥ 1.5x sequential throughput", concurrency,
             verdict(conc_ratio >= 1.5)],
        ],
    )  # fmt: skip
    shell = table(
        ["call", "median ms"],
        [
            ["exec `true`, empty `~/.bashrc`", ms("exec_clean_med")],
            ["exec `true`, the real user's `~/.bashrc`", ms("exec_real_med")],
            ["start-up files' cost per exec", f"{shell_cost:.2f}"],
            ["SFTP `stat`, empty `~/.bashrc`", ms("sftp_stat_med")],
            ["SFTP `stat`, the real user's `~/.bashrc`", ms("sftp_stat_real_med")],
            ["SFTP `realpath`", ms("sftp_realpath_med")],
            ["SFTP `read_range`, 4 KiB", ms("sftp_read_med")],
        ],
    )  # fmt: skip
    return f"""## SSH calls (`benchmarks/ssh_calls.py`)

Reproduce: `python -m benchmarks.ssh_calls --calls {calls}` (starts its own sshd on 127.0.0.1).

{calls} `read_lines`-equivalent calls (`sed -n 1,20p -- FILE`, 20 lines back) against a
throwaway OpenSSH server on loopback, after {WARMUP} warm-up calls each. The main comparison
runs with an empty remote `~/.bashrc` so that it measures the transport, not the shell.
SSHHost's command is wrapped in `timeout -k 2 T` (one more exec on the host), the CLI's is not.

{per_call}

{targets}

### The remote shell's start-up files

sshd runs every exec through the user's login shell, and bash reads `~/.bashrc` when started
by sshd. SFTP requests go to the already running sftp-server and start no shell.

{shell}

Sleuth's `stat`, `realpath` (so every policy path check) and `read_range` (byte reads,
safetensors headers) go through SFTP and never pay the shell's start-up cost; `run` (sed,
grep, find, Sleuth's own `python3 -` programs) pays it once per command.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ssh_calls.md"))
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot benchmark: {reason}")
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as tmp:
        got = measure(Path(tmp), args.calls)
    text = report(got, args.calls)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
