"""LocalHost.run: each command in a process group of its own (what a timeout kills), inside
Sleuth's session rather than a new one: setsid() under the kernel's autogroup scheduling
stalled commands for seconds beside a busy engine (engine_status's window ran 53 s for 10)."""

from __future__ import annotations

import os
import sys
import time

from sleuth.hosts.host import LocalHost

IDS = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"


def test_a_command_leads_its_own_group_in_sleuths_session() -> None:
    result = LocalHost().run([sys.executable, "-c", IDS], timeout=30, max_bytes=1000)
    assert result.exit_code == 0, result.stderr
    pid, pgid, sid = (int(x) for x in result.stdout.split())
    assert pgid == pid != os.getpgid(0)
    assert sid == os.getsid(0)


def test_a_timeout_kills_the_commands_children_too() -> None:
    script = "sleep 300 & echo $!; wait"
    result = LocalHost().run(["sh", "-c", script], timeout=1, max_bytes=1000)
    assert result.timed_out and result.exit_code is None
    child = int(result.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the background sleep {child} outlived its command's timeout")
