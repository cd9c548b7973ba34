"""Where a server's log is read from: the end of a file inside the host's roots, a systemd
unit's journal, or a container's or pod's own log. diagnose_log and engine_log_series read
logs this one way."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from sleuth.hosts.host import HostError
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.registry import ToolInput
from sleuth.tools.results import ToolError

TAIL_BYTES = 1 << 20
"""At most this much of the end of a log file is read: the failure is at the end."""
UNIT_NAME = re.compile(r"^[A-Za-z0-9@_.:\\-]+$")


class LogSourceInput(ToolInput):
    """Where a tool reads a server's log: exactly one of a file, a unit or the container."""

    path: str | None = Field(
        None, description="Log file on the host (inside its roots), e.g. /var/log/vllm.log"
    )
    unit: str | None = Field(
        None,
        description="systemd unit whose journal to read instead, e.g. vllm.service "
        "(needs journalctl on the host)",
    )
    container_log: bool = Field(
        False,
        description="Read the log of the host's container or pod instead (`docker|podman|"
        "nerdctl logs`, `kubectl logs`): the host must be a container or pod host",
    )
    previous: bool = Field(
        False,
        description="With container_log on a pod: the log of its container before the last "
        "restart (`kubectl logs --previous`), where a crash loop keeps its failure",
    )

    @model_validator(mode="after")
    def _one_source(self) -> LogSourceInput:
        if (self.path is not None) + (self.unit is not None) + self.container_log != 1:
            raise ValueError(
                "give exactly one of path (a log file), unit (a systemd unit) or "
                "container_log=true (the host's container or pod)"
            )
        if self.previous and not self.container_log:
            raise ValueError("previous reads a pod's earlier log: set container_log=true too")
        if self.unit is not None and (not UNIT_NAME.match(self.unit) or self.unit.startswith("-")):
            raise ValueError(f"unit {self.unit!r} is not a systemd unit name")
        return self


def read_log(
    host: SandboxedHost, args: LogSourceInput, lines: int
) -> tuple[str, str, list[list[str]]]:
    """The log `args` names: where it was read, its text (the end of it), the commands run."""
    if args.path is not None:
        return read_log_file(host, args.path)
    if args.container_log:
        return read_container_log(host, lines, args.previous)
    return read_journal(host, args.unit or "", lines)


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
