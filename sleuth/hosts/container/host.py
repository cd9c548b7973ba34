"""ContainerHost: the Host protocol inside a container or pod, through its runtime on a via
host (this machine or an SSH host).

```python
host = ContainerHost("sglang0", via=SSHHost("gpu1", ...), config=settings.hosts["sglang0"])
host.request("python3", {"op": "ping"}, timeout=10)   # the resident program, in the container
host.run(["nvidia-smi", "-L"], timeout=30, max_bytes=4096)   # one `podman exec` per command
```

Sleuth's program (`program/resident.py`) starts once per session inside the container,
through the runtime's `exec -i` on the via host, and answers every file read as it does on
an SSH host: the same requests, the same rules beneath the roots, now the container's
filesystem. A container without the interpreter falls back to POSIX tools, each command one
exec. Commands are argument vectors wrapped in the runtime's exec (`target.py`); no
environment crosses into the container.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from pydantic import BaseModel

from sleuth.config import HostConfig
from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.container.discover import find_runtime
from sleuth.hosts.container.pipes import LocalLink
from sleuth.hosts.container.records import image_facts, merged_log
from sleuth.hosts.container.target import Target
from sleuth.hosts.host import Host, HostFacts, RunOptions, RunResult, StatResult, kind_of
from sleuth.hosts.ssh.fallback import ExecFiles
from sleuth.hosts.ssh.program import HostPrograms, Link
from sleuth.hosts.wire import Answer

if TYPE_CHECKING:
    import paramiko

CANNOT_RUN = (126, 127)
"""A runtime's exec exit status for a command it could not find or start in the container."""
RUNTIME_FAILED = 125
"""docker's, podman's and nerdctl's exit status when the exec itself failed (no such
container, not running), as against the command's own."""
IO_TIMEOUT_S = 20.0


class ContainerFacts(BaseModel):
    """What a transcript records of a container host: exactly what was read."""

    via: str
    runtime: str
    container: str = ""
    pod: str = ""
    context: str = ""
    container_id: str = ""
    image: str = ""
    image_id: str = ""
    image_digest: str = ""
    state: str = ""
    started: str = ""
    """Which run of the container this is: a restart mid-question is told by its change."""


class ContainerHost:
    """A container (docker, podman, nerdctl) or a pod's container (kubectl) as a host."""

    def __init__(self, name: str, via: Host, config: HostConfig) -> None:
        self.name, self.via, self.config = name, via, config
        self.python = config.python
        self._target: Target | None = None
        self._programs: HostPrograms | None = None
        self._lock = threading.Lock()
        self._started: str | None = None
        """The run of the container this session began reading (`ContainerFacts.started`)."""
        self._restarted: HostError | None = None

    # -- the runtime --

    @property
    def target(self) -> Target:
        """The container as its runtime names it; the runtime found on first use when
        sleuth.toml names none."""
        with self._lock:
            if self._target is None:
                wanted = f"[hosts.{self.name}]"
                runtime = self.config.runtime or find_runtime(self.via, wanted)
                target = Target.of(self.config, runtime)
                if runtime != "kubectl":
                    seen = image_facts(target, self._inspect(target))
                    target = target.model_copy(update={"pinned": seen["container_id"] or None})
                    self._started = seen["started"]
                self._target = target
            return self._target

    def _inspect(self, target: Target) -> Any:
        done = self.via.run(target.inspect_argv(), timeout=IO_TIMEOUT_S, max_bytes=8 << 20)
        if done.exit_code != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            again = " (it was replaced or removed since this session first saw it)"
            raise HostError(
                f"{target.label} on via host {self.via.name!r} cannot be inspected"
                + (again if target.pinned else "")
                + (f": {said[-1]}" if said else ""),
                ErrorKind.NOT_FOUND,
            )
        return json.loads(done.stdout)

    @property
    def programs(self) -> HostPrograms:
        """Sleuth's program in the container: resident for the session, over the via host's
        connection (or this machine's pipes)."""
        target = self.target
        with self._lock:
            if self._programs is None:
                conn = getattr(self.via, "conn", None)
                link: Link = conn if conn is not None else LocalLink(IO_TIMEOUT_S)
                wrap = target.exec_argv([], stdin=True)
                self._programs = HostPrograms(link, self.run, self.name, "resident", wrap)
            return self._programs

    # -- commands --

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> RunResult:
        if not argv:
            raise HostError("empty command", ErrorKind.INVALID_INPUT)
        stdin = options.get("stdin")
        wrapped = self.target.exec_argv(argv, stdin=stdin is not None)
        try:
            done = self.via.run(wrapped, **options)
        except HostError as exc:
            if exc.kind is ErrorKind.COMMAND_NOT_FOUND:
                raise HostError(
                    f"{wrapped[0]} is not installed on via host {self.via.name!r} of host "
                    f"{self.name!r}; install it there, or set `runtime` under [hosts.{self.name}]",
                    ErrorKind.COMMAND_NOT_FOUND,
                ) from exc
            raise
        target = self.target
        if done.exit_code == RUNTIME_FAILED and target.runtime != "kubectl" and not done.stdout:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise HostError(
                f"{wrapped[0]} could not run {argv[0]} in {target.label} of host {self.name!r} "
                f"(exit 125: {said[-1] if said else 'no message'}). Is it still running, and "
                f"the one this session first saw? `sleuth hosts --discover {self.via.name}` "
                "lists what runs there",
                ErrorKind.HOST,
            )
        if done.exit_code in CANNOT_RUN and not done.stdout:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise HostError(
                f"{argv[0]}: command not found in container {target.label} of host "
                f"{self.name!r}" + (f" ({said[-1]})" if said else "") + "; the file tools "
                "(read_lines, grep, list_dir, read_json, safetensors_header) still read it "
                "with POSIX tools",
                ErrorKind.COMMAND_NOT_FOUND,
            )
        return done.model_copy(update={"argv": list(argv)})

    def logs(
        self, tail: int, *, previous: bool = False, timeout: float = 60
    ) -> tuple[str, RunResult]:
        """The container's own log (what the engine printed), its last `tail` lines in the
        order they were written, and the run that read it."""
        target = self.target
        if previous and target.runtime != "kubectl":
            raise HostError(
                f"`previous` is a pod's log before its container restarted (kubectl); "
                f"{target.label} keeps one log across restarts: read it without `previous`",
                ErrorKind.INVALID_INPUT,
            )
        argv = target.logs_argv(tail, previous=previous)
        done = self.via.run(argv, timeout=timeout, max_bytes=64 << 20)
        if done.timed_out or done.exit_code != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise HostError(
                f"{argv[0]} logs failed for {target.label} on via host {self.via.name!r} "
                f"(exit {done.exit_code}): {said[-1] if said else 'no message'}",
                ErrorKind.NOT_FOUND if done.exit_code else ErrorKind.TIMEOUT,
            )
        # docker, podman and nerdctl give the container's stderr as theirs; kubectl merges
        # both into its stdout and keeps stderr for its own notes ("Defaulted container").
        kept = (done.stdout,) if target.runtime == "kubectl" else (done.stdout, done.stderr)
        return merged_log(kept, tail), done

    # -- files: the program's requests where it runs, else POSIX tools by exec --

    def _exec_files(self) -> ExecFiles:
        return ExecFiles(self.run, self.name, IO_TIMEOUT_S)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            return self._exec_files().read(path, offset, length)
        except OSError as exc:
            raise HostError(
                f"cannot read {path} on host {self.name!r}: {exc.strerror or exc}",
                ErrorKind.NOT_FOUND if isinstance(exc, FileNotFoundError) else ErrorKind.HOST,
            ) from exc

    def realpath(self, path: str) -> str:
        try:
            return self._exec_files().realpath(path)
        except FileNotFoundError as exc:
            raise HostError(
                f"no such file or directory on host {self.name!r}: {path}", ErrorKind.NOT_FOUND
            ) from exc
        except OSError as exc:
            raise HostError(f"cannot resolve {path} on host {self.name!r}: {exc}") from exc

    def stat(self, path: str) -> StatResult:
        try:
            mode, size, mtime = self._exec_files().lstat(path)
        except FileNotFoundError:
            return StatResult(path=path, kind="missing")
        except OSError as exc:
            raise HostError(f"cannot stat {path} on host {self.name!r}: {exc}") from exc
        return StatResult(path=path, kind=kind_of(mode), size=size, mtime=float(mtime))

    def request(
        self, python: str, head: dict[str, Any], payload: bytes = b"", *, timeout: float
    ) -> Answer:
        programs = self.programs
        before = programs.starts
        answer = programs.request(python, head, payload, timeout=timeout)
        if before and programs.starts != before:  # the program died and was started again
            self._same_run()
        if self._restarted is not None:
            raise self._restarted
        return answer

    def _same_run(self) -> None:
        """Refuse, for the rest of the session, a container that restarted since the session
        first read it: what it answers now is a new run of it, not the one the question
        began reading (a crash loop, or someone's restart)."""
        target = self.target
        now = image_facts(target, self._inspect(target))["started"]
        if self._started is None:
            self._started = now
        elif now != self._started and self._restarted is None:
            self._restarted = HostError(
                f"{target.label} on via host {self.via.name!r} restarted during this session "
                f"(it ran as {self._started!r} and now runs as {now!r}); its answers from now "
                "on are of a new run of it: ask again in a new session",
                ErrorKind.HOST,
            )

    # -- what it is --

    def facts(self) -> ContainerFacts:
        """The via host, runtime, container or pod, and the image it runs, as the runtime
        reports them now."""
        target = self.target
        facts = ContainerFacts(
            via=self.via.name,
            runtime=target.runtime,
            container=target.container or "",
            pod=f"{target.namespace}/{target.pod}" if target.pod else "",
            context=target.context or "",
        )
        seen = image_facts(target, self._inspect(target))
        if self._started is None:
            self._started = seen["started"]
        return facts.model_copy(update=seen)

    def identify(self) -> HostFacts:
        """The via host, runtime, container or pod and its image (one inspect), and how the
        file tools reach files: what a run's header records, nothing timed."""
        facts = self.facts()
        mode = self.programs.mode(self.python)
        warnings = []
        if (why := self.programs.why_not(self.python)) is not None:
            warnings.append(f"{why}: the file tools use POSIX tools in the container")
        return HostFacts(
            address=f"{self.target.label} via {self.via.name}",
            file_access="exec",
            call_mode=mode,
            warnings=warnings,
            container=facts.model_dump(),
        )

    def describe(self) -> HostFacts:
        """`identify`, and a command and a file stat timed, for `sleuth hosts --check`."""
        facts = self.identify()
        start = time.monotonic()
        self.run(["true"], timeout=IO_TIMEOUT_S, max_bytes=1024)
        exec_ms = (time.monotonic() - start) * 1000
        start = time.monotonic()
        self.stat("/")
        file_ms = (time.monotonic() - start) * 1000
        return facts.model_copy(
            update={"exec_latency_ms": round(exec_ms, 2), "file_latency_ms": round(file_ms, 2)}
        )

    def transport(self) -> paramiko.Transport | None:
        """None: a port forward would reach the via host, not the container."""
        return None

    def close(self) -> None:
        """The program in the container, then the via host this host opened."""
        if self._programs is not None:
            self._programs.reset()
        self.via.close()
