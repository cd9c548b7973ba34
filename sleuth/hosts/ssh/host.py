"""SSHHost: the Host protocol over one reused SSH connection.

Commands run over exec channels (`channel_exec.py`) of one connection (`connection.py`);
stat, realpath and byte ranges go over SFTP (`sftp.py`), or, on a server without the SFTP
subsystem, over exec with POSIX tools (`fallback.py`): the first refusal on a connection is
noted in `notes` and the rest of that connection uses exec. Both paths give the same results
and the same errors. Requests to Sleuth's own program on the host (the file tools' reads,
beneath the roots) go to one resident program per connection, or one run per request with
`calls="exec"` (`program.py`)."""

from __future__ import annotations

import stat as stat_mod
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Unpack

import paramiko

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import (
    CallMode,
    FileAccess,
    HostFacts,
    RunOptions,
    RunResult,
    StatResult,
    kind_of,
    os_error_kind,
)
from sleuth.hosts.ssh import sftp, sftp_read
from sleuth.hosts.ssh.channel_exec import exec_argv, not_run
from sleuth.hosts.ssh.connection import Connection, LinkOptions
from sleuth.hosts.ssh.fallback import ExecFiles
from sleuth.hosts.ssh.known_hosts import fingerprint, key_label
from sleuth.hosts.ssh.program import HostPrograms
from sleuth.hosts.wire import Answer

T = TypeVar("T")

NO_SFTP = "no SFTP subsystem: using exec fallback"


class SSHHost:
    """A remote machine over one reused SSH connection. Connects on first use; thread-safe."""

    def __init__(
        self,
        name: str,
        target: str,
        *,
        python: str = "python3",
        calls: Literal["resident", "exec"] = "resident",
        **link: Unpack[LinkOptions],
    ) -> None:
        """`link`: how the connection is made and checked (`Connection`'s options, among them
        the required `known_hosts`)."""
        self.name, self.target = name, target
        self.python = python
        """The interpreter `describe` starts Sleuth's program with (requests name their own)."""
        self.conn = Connection(name, target, on_close=self._closed, **link)
        self._pool = sftp.SftpPool(self.conn)
        self.programs = HostPrograms(self.conn, self.run, name, calls)
        self._exec_files = ExecFiles(self.run, name, self.conn.io_timeout)
        self._no_sftp_on: paramiko.Transport | None = None
        self._note_lock = threading.Lock()
        self.notes: list[str] = []
        """Said once per connection: how this host differs from what Sleuth expects."""
        self.bytes_read_sftp = 0
        """File payload bytes returned by `read_range` (over SFTP or its exec fallback)."""
        self._count_lock = threading.Lock()

    @property
    def file_access(self) -> FileAccess:
        """How files are read on the current connection."""
        return "exec" if self._sftp_refused() else "sftp"

    # -- commands --

    def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> RunResult:
        if not argv:
            raise HostError("empty command", ErrorKind.INVALID_INPUT)
        timeout, max_bytes, stdin = options["timeout"], options["max_bytes"], options.get("stdin")
        start = time.monotonic()
        result, reconnected = self.conn.call(
            lambda t: exec_argv(self.conn, t, list(argv), timeout, max_bytes, stdin),
            retry=options.get("retry", True),
        )
        result.duration_s = time.monotonic() - start
        result.reconnected = reconnected
        failed = not_run(result, self.name)
        if failed is not None:
            raise failed
        return result

    # -- files --

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            data = self._file_op(
                lambda s: sftp_read.read(s, path, offset, length),
                lambda: self._exec_files.read(path, offset, length),
            )
        except OSError as exc:
            raise self._error("cannot read", path, exc) from exc
        with self._count_lock:
            self.bytes_read_sftp += len(data)
        return data

    def realpath(self, path: str) -> str:
        try:
            return self._file_op(
                lambda s: sftp.realpath(s, path), lambda: self._exec_files.realpath(path)
            )
        except FileNotFoundError as exc:
            raise HostError(
                f"no such file or directory on host {self.name!r}: {path}", ErrorKind.NOT_FOUND
            ) from exc
        except OSError as exc:
            raise self._error("cannot resolve", path, exc) from exc

    def stat(self, path: str) -> StatResult:
        def over_sftp(client: paramiko.SFTPClient) -> tuple[int, int, int]:
            attrs = client.lstat(path)
            return attrs.st_mode or 0, attrs.st_size or 0, int(attrs.st_mtime or 0)

        try:
            mode, size, mtime = self._file_op(over_sftp, lambda: self._exec_files.lstat(path))
        except FileNotFoundError:
            return StatResult(path=path, kind="missing")
        except OSError as exc:
            raise self._error("cannot stat", path, exc) from exc
        kind = kind_of(mode) if stat_mod.S_IFMT(mode) else "other"
        return StatResult(path=path, kind=kind, size=size, mtime=float(mtime))

    def _file_op(
        self, over_sftp: Callable[[paramiko.SFTPClient], T], over_exec: Callable[[], T]
    ) -> T:
        if not self._sftp_refused():
            try:
                return self.conn.call(lambda t: self._sftp(t, over_sftp))[0]
            except sftp.SftpUnavailable:
                pass
        return over_exec()

    def _sftp(self, transport: paramiko.Transport, op: Callable[[paramiko.SFTPClient], T]) -> T:
        try:
            return self._pool.do(transport, op)
        except sftp.SftpUnavailable:
            with self._note_lock:
                if self._no_sftp_on is not transport:
                    self._no_sftp_on = transport
                    self.notes.append(f"host {self.name!r}: {NO_SFTP}")
            raise

    def _sftp_refused(self) -> bool:
        current = self.conn.transport
        return current is not None and current is self._no_sftp_on and current.is_active()

    def _error(self, action: str, path: str, exc: OSError) -> HostError:
        why = exc.strerror or str(exc) or type(exc).__name__
        return HostError(f"{action} {path} on host {self.name!r}: {why}", os_error_kind(exc))

    def _closed(self) -> None:
        self._pool.reset()
        self.programs.reset()

    # -- Sleuth's program --

    def request(
        self, python: str, head: dict[str, Any], payload: bytes = b"", *, timeout: float
    ) -> Answer:
        return self.programs.request(python, head, payload, timeout=timeout)

    def call_mode(self, python: str | None = None) -> CallMode:
        """How the file tools reach files here (starting Sleuth's program if needed)."""
        return self.programs.mode(python or self.python)

    # -- the rest of the Host protocol --

    def transport(self) -> paramiko.Transport:
        """The live connection (connecting if needed), for port forwards."""
        return self.conn.live()[0]

    def identify(self) -> HostFacts:
        """Connect if needed and start Sleuth's program: address, identity, host key and how
        the file tools reach files, what a run's header records. Nothing else runs: every
        command or SFTP session starts a login shell there, and the shell's start-up files
        (`pyenv init` in root's ~/.bashrc: ~0.5 s of CPU) are paid per host of a fleet."""
        transport = self.transport()
        end = self.conn.endpoint
        assert end is not None
        server_key = transport.get_remote_server_key()
        calls = self.call_mode()
        why_not = self.programs.why_not(self.python)
        return HostFacts(
            address=end.address,
            user=end.user,
            via=end.jumps,
            auth_key=self.conn.auth_used,
            host_key_type=key_label(server_key.get_name()),
            host_key_fingerprint=fingerprint(server_key.asbytes()),
            file_access=self.file_access,
            call_mode=calls,
            warnings=[f"{why_not}: the file tools use POSIX tools"] if why_not else [],
        )

    def describe(self) -> HostFacts:
        """`identify`, and a command and a file stat timed, for `sleuth hosts --check`."""
        facts = self.identify()
        start = time.monotonic()
        self.run(["true"], timeout=10, max_bytes=1024)
        exec_ms = (time.monotonic() - start) * 1000
        start = time.monotonic()
        self.stat("/")
        file_ms = (time.monotonic() - start) * 1000
        access = self.file_access
        return facts.model_copy(
            update={
                "exec_latency_ms": round(exec_ms, 2),
                "file_latency_ms": round(file_ms, 2),
                "file_access": access,
                "warnings": [NO_SFTP] * (access == "exec") + facts.warnings,
            }
        )

    def close(self) -> None:
        self.conn.close()
