"""What one read costs through a container, against the same read on its via host (issue 40).

    python -m benchmarks.container_calls [--calls 200] [--out benchmarks/results/container_calls.md]

Starts a throwaway sshd on 127.0.0.1 (tests/sshd.py) and a real podman container from the
tests' Debian root filesystem (tests/containers.py), puts the same 20-line file on the via
host and in the container, and times `read_lines` of it, one call at a time, in one run:

- on the via host over SSH (Sleuth's program resident on the host), and on the container
  reached through that host (the program resident in the container: one `podman exec -i`
  for the session, carried on the SSH connection);
- on this machine (local processes), and on the container with `via = "local"` (the program
  resident in the container through a local `podman exec -i`).

The first call to a container host starts the program there (one exec); it is timed apart.
The target: a read through a container costs at most 1.3x the same read on its via host.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import write_results
from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.container.host import ContainerHost
from sleuth.hosts.host import Host, LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.containers import Containers, debian_rootfs, missing_reason
from tests.sshd import SSHServer

WARMUP = 10
LINES = "".join(f"line {i} of the engine's config\n" for i in range(1, 21))


def timed(
    first: Callable[[], object], second: Callable[[], object], count: int
) -> tuple[list[float], list[float]]:
    """Each call's milliseconds, the two reads interleaved (ABBA), so that the load of a
    shared machine falls on both alike."""
    for _ in range(WARMUP):
        first()
        second()
    spent: tuple[list[float], list[float]] = ([], [])
    for i in range(count):
        order = ((0, first), (1, second)) if i % 2 == 0 else ((1, second), (0, first))
        for which, call in order:
            start = time.perf_counter()
            call()
            spent[which].append((time.perf_counter() - start) * 1000)
    return spent


def reader(name: str, host: Host, config: HostConfig, path: str) -> Callable[[], object]:
    ctx = ToolContext(hosts={name: SandboxedHost(name, host, config, Limits())})

    def read() -> object:
        result = execute(ctx, "read_lines", {"host": name, "path": path})
        assert result.ok and "line 20" in result.output, result.error
        return result

    return read


def ping(host: Host) -> Callable[[], object]:
    """One request to Sleuth's resident program and its answer: the transport alone."""
    return lambda: host.request("python3", {"op": "ping"}, timeout=10)


def first_call_ms(read: Callable[[], object]) -> float:
    start = time.perf_counter()
    read()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/container_calls.md"))
    args = parser.parse_args()
    if (why := missing_reason()) is not None:
        raise SystemExit(why)
    rootfs = debian_rootfs()
    with tempfile.TemporaryDirectory() as tmp, Containers() as boxes:
        here = Path(tmp)
        (here / "data").mkdir()
        (here / "data" / "config.txt").write_text(LINES)
        box = boxes.run(rootfs, ["sleep", "infinity"])
        boxes.exec(box, ["sh", "-c", "mkdir -p /data && cat > /data/config.txt"], LINES.encode())
        with SSHServer.create(here / "sshd") as sshd:

            def ssh() -> SSHHost:
                return SSHHost(
                    "gpu1",
                    sshd.alias,
                    known_hosts=here / "known_hosts",
                    ssh_config_path=sshd.ssh_config_path,
                    user_known_hosts=sshd.known_hosts_path,
                )

            host_config = HostConfig(ssh=sshd.alias, roots=[str(here / "data")])
            rows = []
            for via_name, via_host, via_config in (
                ("gpu1 (SSH)", ssh(), host_config),
                ("local", LocalHost(), HostConfig(roots=[str(here / "data")])),
            ):
                on_via = reader("via", via_host, via_config, str(here / "data" / "config.txt"))
                config = HostConfig(
                    via=via_host.name, container=box, runtime="podman", roots=["/data"]
                )
                container = ContainerHost(
                    "box", ssh() if via_name != "local" else LocalHost(), config
                )
                in_box = reader("box", container, config, "/data/config.txt")
                start_ms = first_call_ms(in_box)
                via_ms, box_ms = timed(on_via, in_box, args.calls)
                rows.append((f"{via_name}: `read_lines`", via_ms, box_ms, start_ms))
                if isinstance(via_host, SSHHost):
                    via_ms, box_ms = timed(ping(via_host), ping(container), args.calls)
                    rows.append((f"{via_name}: one request (ping)", via_ms, box_ms, start_ms))
                assert container.programs.starts == 1  # one exec for the whole session
                container.close()
                via_host.close()
    write_results(args.out, report(rows, args.calls))


def report(rows: list[tuple[str, list[float], list[float], float]], calls: int) -> str:
    out = [
        "## Reads through a container (`benchmarks/container_calls.py`)",
        "",
        f"Reproduce: `python -m benchmarks.container_calls --calls {calls}` (starts an sshd on "
        "127.0.0.1 and a podman container; needs podman, runc, debootstrap and "
        "`.ci/podman-setup`). Target: a read through a container costs at most 1.3x the same "
        "read on its via host.",
        "",
        f"`read_lines` of a 20-line file, {calls} calls each way one at a time after {WARMUP} "
        "warm-up calls, the two ways interleaved (ABBA), the same file on the via host and in "
        "a podman container (Debian bookworm rootfs, runc). The container's first call starts "
        "Sleuth's program in it (one `podman exec -i` for the session) and is timed apart.",
        "",
        "| via host: what | on via: median ms | p90 | in container: median ms | p90 "
        "| ratio (medians) | first call in container ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, via_ms, box_ms, start_ms in rows:
        v50, b50 = statistics.median(via_ms), statistics.median(box_ms)
        v90 = statistics.quantiles(via_ms, n=10)[-1]
        b90 = statistics.quantiles(box_ms, n=10)[-1]
        out.append(
            f"| {name} | {v50:.2f} | {v90:.2f} | {b50:.2f} | {b90:.2f} | {b50 / v50:.2f}x"
            f" | {start_ms:.0f} |"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
