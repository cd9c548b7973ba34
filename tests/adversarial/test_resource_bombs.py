"""Resource bombs: every tool stays inside its caps of bytes, lines, time and memory, and says
what it cut.

The bombs: a 10 GB sparse file, a single 100 MB line, a folder of 100,000 files, binary
files, and a grep that matches everything. Each is read over the real sshd (and locally),
and while a call runs a sampler watches the resident memory of every process reading the
bomb, this test's own included.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer

from . import figures

LIMITS = Limits(timeout_s=4, max_output_bytes=64_000, max_output_lines=2_000)
NOTICE_SLACK = 512
"""Room for the header, the truncation notice and the summary line a tool adds."""
MEMORY_CAP = 512 << 20
"""Peak resident memory allowed to any one process reading a bomb (Sleuth's included)."""
TIME_CAP = LIMITS.timeout_s + 8
"""The call's timeout, plus the remote kill grace and the local wait past it."""


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bombs")
    with open(root / "sparse10g.bin", "wb") as fh:
        fh.truncate(10 << 30)
    with open(root / "oneline.txt", "wb") as fh:
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
    many = root / "many"
    many.mkdir()
    for i in range(100_000):
        os.close(os.open(many / f"f{i:06d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    (root / "binary.bin").write_bytes(os.urandom(1 << 20) + b"\n\x00\xff" * 1000)
    (root / "binary.safetensors").write_bytes(os.urandom(4096))
    (root / "binary.json").write_bytes(b"\xff\xfe" + os.urandom(4096))
    lines = root / "lines"
    lines.mkdir()
    for i in range(20):
        (lines / f"{i}.txt").write_text("".join(f"line {n} of file {i}\n" for n in range(5_000)))
    return root


@pytest.fixture(scope="module")
def hosts(sshd: SSHServer, bombs: Path, ssh_calls: Any) -> Iterator[dict[str, SandboxedHost]]:
    ssh = SSHHost(
        "remote",
        sshd.alias,
        known_hosts=bombs.parent / "known_hosts",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
        calls=ssh_calls,
    )
    config = HostConfig(roots=[str(bombs)])
    yield {
        "remote": SandboxedHost("remote", ssh, config, LIMITS),
        "local": SandboxedHost("local", LocalHost("local"), config, LIMITS),
    }
    ssh.close()


READERS = ("sleuth-host-program", "/dev/fd/")
"""What the command line of Sleuth's host program, and of a grep it runs on files it opened,
holds: they read the bomb without naming it."""


class PeakMemory(threading.Thread):
    """Samples the resident memory of every process whose command line names one of
    `needles`."""

    def __init__(self, *needles: str) -> None:
        super().__init__(daemon=True)
        self.needles = [n.encode() for n in needles]
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != os.getpid():
                    self.peak = max(self.peak, self._rss(pid))

    def _rss(self, pid: str) -> int:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if not any(needle in cmdline for needle in self.needles):
                return 0
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0


CALLS: list[Any] = [
    ("read_lines", {"path": "sparse10g.bin"}),
    ("grep", {"path": "sparse10g.bin", "pattern": "x"}),
    ("read_json", {"path": "sparse10g.bin"}),
    ("safetensors_header", {"path": "sparse10g.bin"}),
    ("read_lines", {"path": "oneline.txt"}),
    ("grep", {"path": "oneline.txt", "pattern": "x"}),
    ("read_json", {"path": "oneline.txt"}),
    ("list_dir", {"path": "many"}),
    ("list_dir", {"path": "many", "max_entries": 20_000}),
    ("grep", {"path": "many", "pattern": "anything"}),
    ("checkpoint_summary", {"model_dir": "many"}),
    ("read_lines", {"path": "binary.bin"}),
    ("grep", {"path": "binary.bin", "pattern": "."}),
    ("read_json", {"path": "binary.json"}),
    ("safetensors_header", {"path": "binary.safetensors"}),
    ("grep", {"path": "lines", "pattern": ""}),
    ("grep", {"path": ".", "pattern": ".", "context": 20, "max_matches": 5000}),
    ("read_lines", {"path": "lines/0.txt", "start": 1, "end": 5000}),
]


@pytest.mark.ssh
@pytest.mark.parametrize("where", ["remote", "local"])
@pytest.mark.parametrize(("tool", "args"), CALLS)
def test_bombs_stay_inside_the_caps_and_say_what_was_cut(
    hosts: dict[str, SandboxedHost], bombs: Path, where: str, tool: str, args: dict[str, Any]
) -> None:
    ctx = ToolContext(hosts=hosts, limits=LIMITS)
    figures.touch("bombs_over_cap")
    figures.touch("bombs_silent_cuts")
    watcher = PeakMemory(str(bombs), *READERS)
    watcher.start()
    own_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.monotonic()
    result = execute(ctx, tool, {"host": where, **args})
    elapsed = time.monotonic() - start
    watcher.stop.set()
    watcher.join()
    own_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - own_before

    assert "internal error" not in (result.error or ""), result.error
    size = len(result.output.encode())
    lines = result.output.count("\n")
    over = (
        size > LIMITS.max_output_bytes + NOTICE_SLACK
        or lines > LIMITS.max_output_lines + 4
        or elapsed > TIME_CAP
        or watcher.peak > MEMORY_CAP
        or own_growth > MEMORY_CAP
    )
    figures.count("bombs_over_cap", int(over))
    assert size <= LIMITS.max_output_bytes + NOTICE_SLACK
    assert lines <= LIMITS.max_output_lines + 4
    assert elapsed <= TIME_CAP, f"{tool} took {elapsed:.1f} s"
    assert watcher.peak <= MEMORY_CAP, f"a reader peaked at {watcher.peak >> 20} MiB"
    assert own_growth <= MEMORY_CAP, f"Sleuth grew by {own_growth >> 20} MiB"
    silent = result.ok and result.bytes_cut > 0 and "truncated" not in result.output
    figures.count("bombs_silent_cuts", int(silent))
    assert not silent, result.output[-300:]
    if not result.ok:  # a refusal or failure says why, in words
        assert result.error and len(result.error) > 20
