"""Where tools run: the Host protocol and the local host.

A host runs argument vectors (never shell strings), reads byte ranges of files,
resolves paths the way the host's own filesystem does, and stats them. The SSH
implementation lives in `sleuth.hosts.ssh`. Nothing in the agent imports this module: it
reaches hosts through the tool registry.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat as stat_mod
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypedDict,
    Unpack,
    runtime_checkable,
)

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind
from sleuth.errors import HostError as HostError  # its home for most callers
from sleuth.hosts.wire import Answer, NoProgram

if TYPE_CHECKING:
    import paramiko

PathKind = Literal["file", "dir", "symlink", "other", "missing"]


class RunResult(BaseModel):
    """What one command did on a host."""

    argv: list[str]
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_cut: int = 0
    """Bytes of stdout read and discarded past the cap."""
    stderr_cut: int = 0
    timed_out: bool = False
    duration_s: float = 0.0
    reconnected: bool = False
    """True when the connection had dropped and was re-established for this call."""


class StatResult(BaseModel):
    path: str
    kind: PathKind
    size: int = 0
    """Bytes."""
    mtime: float = 0.0
    """Seconds since the epoch; whole seconds over SSH (SFTP and `stat` give no fraction)."""


FileAccess = Literal["local", "sftp", "exec"]
CallMode = Literal["resident", "exec", "posix", "local"]
"""How the file tools reach a host's files: Sleuth's program resident on it for the whole
connection, that program run once per call over exec, POSIX tools over exec and SFTP (a host
without Python), or local processes on this machine."""


class HostFacts(BaseModel):
    """What `sleuth hosts --check` and a transcript's header say about a connected host."""

    address: str = Field(description="host:port as connected; empty for this machine.")
    user: str = ""
    via: list[str] = Field(default_factory=list, description="Jump hosts, in order.")
    auth_key: str = Field("", description="The key that logged in, and where it came from.")
    host_key_type: str = Field("", description="As `ssh-keygen -l` names it: ED25519, RSA...")
    host_key_fingerprint: str = Field("", description="`SHA256:...`, in full.")
    exec_latency_ms: float = 0.0
    file_latency_ms: float = 0.0
    file_access: FileAccess = Field(
        "local", description="How files are read: locally, over SFTP, or by exec with POSIX tools."
    )
    call_mode: CallMode = Field(
        "local",
        description="How the file tools reach files: resident program, program per call, "
        "POSIX tools, or this machine.",
    )
    warnings: list[str] = Field(default_factory=list)
    container: dict[str, str] = Field(
        default_factory=dict,
        description="A container or pod host: via host, runtime, container or pod, image "
        "and its digest (`container/host.py`, ContainerFacts).",
    )


class RunOptions(TypedDict):
    """How `Host.run` runs one command."""

    timeout: float
    """Wall-clock seconds before the command's process group is killed."""
    max_bytes: int
    """Stdout bytes kept; the rest is read and counted in `RunResult.stdout_cut`."""
    stdin: NotRequired[bytes | None]
    """Fed to the command, then closed; absent or None: no stdin."""
    retry: NotRequired[bool]
    """True when absent. False for commands that change the host: a dropped connection then
    fails the call instead of running the command a second time after reconnecting."""


@runtime_checkable
class Host(Protocol):
    """A machine that tools can act on."""

    name: str

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> RunResult:
        """Run `argv` (never a shell string) with a wall-clock timeout; keep at most
        `max_bytes` of stdout."""
        ...

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Read up to `length` bytes of `path` starting at `offset`."""
        ...

    def realpath(self, path: str) -> str:
        """The canonical absolute path, symlinks followed. HostError if missing."""
        ...

    def stat(self, path: str) -> StatResult:
        """Stat without following a final symlink; kind "missing" when absent."""
        ...

    def request(
        self, python: str, head: dict[str, Any], payload: bytes = b"", *, timeout: float
    ) -> Answer:
        """One request to Sleuth's program on the host (`program/resident.py`), run by
        `python`. NoProgram where there is none: files are then read with POSIX tools."""
        ...

    def identify(self) -> HostFacts:
        """Connect if needed and report address, identity and keys: no latency measured,
        nothing run but what the file tools need (a run's start, once per host)."""
        ...

    def describe(self) -> HostFacts:
        """`identify`, with the latency of a command and of a file stat measured."""
        ...

    def transport(self) -> paramiko.Transport | None:
        """The live SSH connection, for port forwards; None for a host that has none."""
        ...

    def close(self) -> None: ...


STDERR_CAP = 64 * 1024
READ_BLOCK = 1 << 20


class RangeReader(Protocol):
    def read_range(self, path: str, offset: int, length: int) -> bytes: ...


def read_whole(
    host: RangeReader, path: str, *, size: int | None = None, timeout: float | None = None
) -> bytes:
    """Read a file in blocks to its end (or its first `size` bytes), giving up once `timeout`
    seconds have passed: one big read over a slow link would otherwise hold a call for minutes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    parts, offset = [], 0
    while size is None or offset < size:
        want = READ_BLOCK if size is None else min(READ_BLOCK, size - offset)
        block = host.read_range(path, offset, want)
        if not block:
            break
        parts.append(block)
        offset += len(block)
        if deadline is not None and time.monotonic() > deadline:
            raise HostError(
                f"reading {path} took longer than {timeout:g} s after {offset} bytes; read a "
                "smaller file, or raise [limits] timeout_s in sleuth.toml",
                ErrorKind.TIMEOUT,
            )
    return b"".join(parts)


class _CappedReader(threading.Thread):
    """Drain a stream, keeping the first `cap` bytes and counting the rest.

    Both streams are drained at once so that neither can fill its pipe and
    stall the child while we wait on the other.
    """

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.cut = 0

    def run(self) -> None:
        while chunk := self.stream.read1(1 << 16):  # type: ignore[attr-defined]
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.cut += max(0, len(chunk) - max(room, 0))


class LocalHost:
    """This machine. Commands run as subprocesses from argv, each in a process group of its
    own (what a timeout kills)."""

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> RunResult:
        timeout, stdin = options["timeout"], options.get("stdin")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # A group, not a session: with the kernel's autogroup scheduling, setsid()
                # made `true` wait up to 8 s (21 s once) on this 2-core machine beside a CPU
                # vLLM under load; a process group of its own never passed 4 ms.
                process_group=0,
            )
        except FileNotFoundError as exc:
            raise HostError(
                f"{argv[0]}: command not found on host {self.name!r}", ErrorKind.COMMAND_NOT_FOUND
            ) from exc
        assert proc.stdout is not None and proc.stderr is not None
        out = _CappedReader(proc.stdout, options["max_bytes"])
        err = _CappedReader(proc.stderr, STDERR_CAP)
        out.start()
        err.start()
        if stdin is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        # A blocking wait and a timer that kills: Popen.wait(timeout) polls with sleeps
        # of up to 50 ms, which a fast command pays on every call.
        expired = threading.Event()
        timer = threading.Timer(timeout, _kill_group, (proc, expired))
        timer.daemon = True
        timer.start()
        proc.wait()
        timer.cancel()
        timed_out = expired.is_set()
        out.join()
        err.join()
        return RunResult(
            argv=list(argv),
            exit_code=None if timed_out else proc.returncode,
            stdout=bytes(out.kept),
            stderr=bytes(err.kept),
            stdout_cut=out.cut,
            stderr_cut=err.cut,
            timed_out=timed_out,
            duration_s=time.monotonic() - start,
        )

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                return fh.read(length)
        except OSError as exc:
            raise HostError(
                f"cannot read {path} on host {self.name!r}: {exc.strerror}", os_error_kind(exc)
            ) from exc

    def realpath(self, path: str) -> str:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            raise HostError(
                f"no such file or directory on host {self.name!r}: {path}", ErrorKind.NOT_FOUND
            )
        return real

    def stat(self, path: str) -> StatResult:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return StatResult(path=path, kind="missing")
        except OSError as exc:
            raise HostError(
                f"cannot stat {path} on host {self.name!r}: {exc.strerror}", os_error_kind(exc)
            ) from exc
        return StatResult(path=path, kind=kind_of(st.st_mode), size=st.st_size, mtime=st.st_mtime)

    def request(
        self, python: str, head: dict[str, Any], payload: bytes = b"", *, timeout: float
    ) -> Answer:
        raise NoProgram(f"host {self.name!r} is this machine: its tools run as local processes")

    def identify(self) -> HostFacts:
        """Nothing to resolve or verify: this machine has no address, key or link."""
        return HostFacts(address="", file_access="local", call_mode="local")

    def describe(self) -> HostFacts:
        return self.identify()

    def transport(self) -> None:
        return None

    def close(self) -> None:
        pass


def _kill_group(proc: subprocess.Popen[bytes], expired: threading.Event) -> None:
    """The whole group: a timed-out command must leave nothing behind."""
    if proc.poll() is None:
        expired.set()
        with contextlib.suppress(ProcessLookupError):  # it ended between poll and kill
            os.killpg(proc.pid, signal.SIGKILL)


def os_error_kind(exc: OSError) -> ErrorKind:
    """The kind of a file error, from its class (never its text)."""
    if isinstance(exc, FileNotFoundError):
        return ErrorKind.NOT_FOUND
    if isinstance(exc, PermissionError):
        return ErrorKind.PERMISSION
    return ErrorKind.HOST


def kind_of(mode: int) -> PathKind:
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    if stat_mod.S_ISREG(mode):
        return "file"
    return "other"
