"""Where a server's log is read from: the end of a file inside the host's roots, a systemd
unit's journal, or a container's or pod's own log. diagnose_log and engine_log_series read
logs this one way."""

from __future__ import annotations

import re

from sleuth.hosts.host import HostError
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.results import ToolError

TAIL_BYTES = 1 << 20
"""At most this much of the end of a log file is read: the failure is at the end."""
UNIT_NAME = re.compile(r"^[A-Za-z0-9@_.:\\-]+$")


def read_log_file(host: SandboxedHost, asked: str) -> tuple[str, str, list[list[str]]]:
    path = host.resolve(asked)
    st = host.files.stat(path)
    if st.kind != "file":
        raise ToolError(f"{path} is not a file on host {host.name!r} ({st.kind})")
    start = max(0, st.size - TAIL_BYTES)
    raw = host.files.read_range(path, start, st.size - start)
    text = raw.decode(errors="replace")
    if start:  # the first line read is a partial one
        text = text.partition("\n")[2]
    return path, text, []


def read_journal(host: SandboxedHost, unit: str, lines: int) -> tuple[str, str, list[list[str]]]:
    # `--output=cat` prints the messages alone; the unit travels inside its own option word.
    argv = ["journalctl", "--no-pager", "--output=cat", f"--lines={lines}", f"--unit={unit}"]
    try:
        run = host.run(argv, max_bytes=TAIL_BYTES)
    except HostError as exc:
        raise ToolError(f"could not run journalctl on host {host.name!r}: {exc}") from exc
    if run.exit_code == 127 or (b"not found" in run.stderr and not run.stdout):
        raise ToolError(
            f"journalctl is not on host {host.name!r} (no systemd journal there); give the "
            "server's log file as `path` instead"
        )
    if run.timed_out or run.exit_code != 0:
        err = run.stderr.decode(errors="replace").strip()[-500:]
        raise ToolError(f"journalctl failed on host {host.name!r} (exit {run.exit_code}): {err}")
    return f"journal of {unit}", run.stdout.decode(errors="replace"), [run.argv]


def read_container_log(
    host: SandboxedHost, lines: int, previous: bool
) -> tuple[str, str, list[list[str]]]:
    from sleuth.hosts.container.host import ContainerHost  # paramiko: only for a container

    box = host.host
    if not isinstance(box, ContainerHost):
        raise ToolError(
            f"host {host.name!r} is not a container or pod host, so it has no container log; "
            "give the log file as `path`, or a systemd unit as `unit`"
        )
    try:
        text, run = box.logs(lines, previous=previous)
    except HostError as exc:
        raise ToolError(str(exc), exc.kind) from exc
    which = "previous log" if previous else "log"
    return f"{which} of {box.target.label}", text, [run.argv]
