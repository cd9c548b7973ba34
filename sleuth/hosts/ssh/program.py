"""Sleuth's host program on an SSH host: one resident per connection and interpreter, or one
run per request on the exec path.

```python
programs = HostPrograms(conn, host.run, "gpu1", calls="resident")
answer = programs.request("python3", {"op": "ping"}, b"", timeout=30)
```

- resident: `exec PYTHON -I -S -c BOOT serve` on one session channel, started on first use
  (the login shell and its start-up files run once, here); the program's source and modules
  go in on stdin and its hello is checked; then requests are framed on the channel with ids,
  several in flight at once, and a reader thread hands each answer to its caller.
- exec: `PYTHON -I -S -c BOOT once` per request through the host's `run` (its timeout, caps
  and reconnection), the bundle and the one request on stdin.
- A program that ends (EOF) or hangs (no answer, and none to a ping either) is dropped and
  the request sent once more to a fresh one; a second failure is reported. A request that is
  only slow (the program still answers pings) is a timeout, not retried.
- A missing interpreter, or a program that will not start, is remembered for the connection
  (NoProgram): the caller reads files with POSIX tools instead.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import paramiko

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import CallMode, RunResult
from sleuth.hosts.program.resident import BOOT, frame, read_frame
from sleuth.hosts.wire import (
    MODULES,
    Answer,
    Bundle,
    NoProgram,
    ProgramGone,
    ProgramTimeout,
    check_hello,
    frames,
)

GRACE_S = 5.0
"""How long past a request's own timeout its answer is awaited (the program reports its
timeouts itself; this is for one that cannot)."""
PING_S = 3.0
REPLY_CAP = 1 << 30
"""Bytes of one exec-path answer; a read asks for at most what the caller will hold."""
STDERR_KEPT = 4096
CHANNEL_ERRORS = (OSError, EOFError, paramiko.SSHException)
Run = Callable[..., RunResult]
"""The host's `run`: the exec path's requests and the kill of a hung program go through it."""
T = TypeVar("T")


class Channel(Protocol):
    """A started program's streams: an SSH session channel, or a local process's pipes."""

    closed: bool
    status_event: threading.Event

    def sendall(self, data: bytes) -> None: ...
    def recv(self, nbytes: int) -> bytes: ...
    def recv_stderr(self, nbytes: int) -> bytes: ...
    def exit_status_ready(self) -> bool: ...
    def recv_exit_status(self) -> int: ...
    def close(self) -> None: ...


class Link(Protocol):
    """Where the program runs: an SSH connection (`Connection`), or this machine for a
    container whose runtime runs here (`hosts/container/pipes.py`)."""

    io_timeout: float
    channels: threading.BoundedSemaphore

    @property
    def transport(self) -> Any: ...
    def call(self, op: Callable[[Any], T], *, retry: bool = True) -> tuple[T, bool]: ...
    def open_program(self, transport: Any, argv: list[str]) -> Channel: ...


class _Waiter:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.head: dict[str, Any] = {}
        self.payload = b""
        self.gone = ""


class Resident:
    """Sleuth's program running on the host for the life of one session channel."""

    def __init__(
        self, conn: Link, run: Run, python: str, name: str, wrap: Sequence[str] = ()
    ) -> None:
        self.conn, self.run, self.python, self.name = conn, run, python, name
        self.wrap = list(wrap)
        """The argv the program's own runs inside (a container runtime's `exec -i`)."""
        self.channel: Channel | None = None
        self.pid = 0
        self.dead = ""
        """Why it is no longer usable, once it is not."""
        self._pending: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._send = threading.Lock()
        self._buf = bytearray()
        self._stderr = bytearray()
        self._slot = False

    # -- starting --

    def start(self, transport: Any) -> None:
        """Start the program on `transport` and check its hello; NoProgram when it cannot."""
        bundle = Bundle.of(MODULES)
        self.dead, self._buf, self._stderr = "", bytearray(), bytearray()
        if not self.conn.channels.acquire(timeout=self.conn.io_timeout):
            raise HostError(
                f"no free channel on host {self.name!r} for Sleuth's program", ErrorKind.TIMEOUT
            )
        self._slot = True
        try:
            argv = [*self.wrap, self.python, "-I", "-S", "-c", BOOT, "serve"]
            channel = self.channel = self.conn.open_program(transport, argv)
            threading.Thread(target=self._drain_stderr, daemon=True).start()
            try:
                channel.sendall(bundle.stdin)
                hello = read_frame(self._read)
            except ValueError:
                hello = None
            except TimeoutError:
                raise NoProgram(
                    f"Sleuth's program did not start on host {self.name!r} within "
                    f"{self.conn.io_timeout:g} s ({self.python})",
                    ErrorKind.TIMEOUT,
                ) from None
            except CHANNEL_ERRORS:
                # A shell that could not find the interpreter may close the channel before
                # the program is all sent: that is a start that failed, unless the link went.
                if not transport.is_active():
                    raise
                hello = None
            if hello is None:
                raise self._start_failure(channel)
            check_hello(hello[0], bundle, self.name)
        except BaseException:
            self.close()
            raise
        self.pid = int(hello[0].get("pid") or 0)
        threading.Thread(target=self._read_answers, daemon=True).start()

    def _start_failure(self, channel: Channel) -> NoProgram:
        channel.status_event.wait(2)
        status = channel.recv_exit_status() if channel.exit_status_ready() else None
        if status in (126, 127):  # a runtime's exec says 126 where it cannot run it
            return NoProgram(f"{self.python} was not found on host {self.name!r}")
        said = self._stderr.decode(errors="replace").strip().splitlines()
        return NoProgram(
            f"Sleuth's program would not start on host {self.name!r} with {self.python} "
            f"(exit {status}): {said[-1] if said else 'no message'}",
            ErrorKind.HOST,
        )

    # -- talking --

    def ask(self, head: dict[str, Any], payload: bytes, timeout: float) -> Answer:
        """Send one request and wait for its answer."""
        waiter = self._exchange(head, payload)
        if waiter.event.wait(timeout + GRACE_S):
            if waiter.gone:
                raise ProgramGone(f"Sleuth's program on host {self.name!r} {waiter.gone}")
            return Answer(waiter.head, waiter.payload)
        self._forget(waiter)
        if self._answers_ping():
            raise ProgramTimeout()
        self._die("stopped answering")
        self.kill()
        raise ProgramGone(f"Sleuth's program on host {self.name!r} stopped answering")

    def _exchange(self, head: dict[str, Any], payload: bytes) -> _Waiter:
        waiter = _Waiter()
        with self._lock:
            if self.dead:
                raise ProgramGone(f"Sleuth's program on host {self.name!r} {self.dead}")
            rid = next(self._ids)
            self._pending[rid] = waiter
        assert self.channel is not None
        try:
            with self._send:
                self.channel.sendall(frame({**head, "id": rid}, payload))
        except CHANNEL_ERRORS as exc:
            self._die(f"could not be written to ({exc or type(exc).__name__})")
            raise ProgramGone(f"Sleuth's program on host {self.name!r} {self.dead}") from exc
        return waiter

    def _forget(self, waiter: _Waiter) -> None:
        with self._lock:
            for rid, pending in list(self._pending.items()):
                if pending is waiter:
                    del self._pending[rid]

    def _answers_ping(self) -> bool:
        try:
            waiter = self._exchange({"op": "ping", "timeout": PING_S}, b"")
        except ProgramGone:
            return False
        answered = waiter.event.wait(PING_S) and not waiter.gone
        self._forget(waiter)
        return answered

    def _read(self, size: int) -> bytes:
        """Up to `size` bytes of the program's output (fewer only at its end)."""
        assert self.channel is not None
        while len(self._buf) < size:
            chunk = self.channel.recv(max(size - len(self._buf), 1 << 16))
            if not chunk:
                break
            self._buf += chunk
        got = bytes(self._buf[:size])
        del self._buf[:size]
        return got

    def _patient_read(self, size: int) -> bytes:
        """As `_read`, but an idle program is not a dead one: wait for as long as it is up."""
        while True:
            try:
                return self._read(size)
            except TimeoutError:
                if self.channel is None or self.channel.closed:
                    return b""

    def _read_answers(self) -> None:
        why = "ended (its output closed)"
        try:
            while (got := read_frame(self._patient_read)) is not None:
                head, payload = got
                with self._lock:
                    waiter = self._pending.pop(head.get("id"), None)  # type: ignore[arg-type]
                if waiter is not None:
                    waiter.head, waiter.payload = head, payload
                    waiter.event.set()
        except CHANNEL_ERRORS as exc:
            why = f"failed ({exc or type(exc).__name__})"
        except ValueError:
            why = "sent an answer that is not a frame"
        said = self._stderr.decode(errors="replace").strip().splitlines()
        self._die(why + (f": {said[-1]}" if said else ""))

    def _drain_stderr(self) -> None:
        """Read stderr as it comes: unread, it would fill the window the answers share."""
        channel = self.channel
        assert channel is not None
        while True:
            try:
                chunk = channel.recv_stderr(STDERR_KEPT)
            except TimeoutError:
                if channel.closed:
                    return
                continue
            except CHANNEL_ERRORS:
                return
            if not chunk:
                return
            self._stderr += chunk
            del self._stderr[:-STDERR_KEPT]

    # -- ending --

    def _die(self, why: str) -> None:
        with self._lock:
            if not self.dead:
                self.dead = why
            waiting, self._pending = self._pending, {}
        for waiter in waiting.values():
            waiter.gone = self.dead
            waiter.event.set()

    def kill(self) -> None:
        """A hung program ignores its closed input: kill it, without waiting on the link."""
        pid = self.pid

        def kill() -> None:
            if pid:
                with contextlib.suppress(HostError):
                    self.run(["kill", "-KILL", str(pid)], timeout=5, max_bytes=1024)
            self.close()

        threading.Thread(target=kill, daemon=True).start()

    def close(self) -> None:
        self._die("was closed")
        if self.channel is not None:
            with contextlib.suppress(*CHANNEL_ERRORS):
                self.channel.close()
        with self._lock:
            slot, self._slot = self._slot, False
        if slot:
            self.conn.channels.release()


class HostPrograms:
    """Sleuth's program on one SSH host, for every interpreter asked for."""

    def __init__(
        self, conn: Link, run: Run, name: str, calls: CallMode, wrap: Sequence[str] = ()
    ) -> None:
        self.conn, self.run, self.name, self.calls = conn, run, name, calls
        self.wrap = list(wrap)
        """What every run of the program is wrapped in: a container runtime's `exec -i`."""
        self.starts = 0
        """Resident programs started, all connections together."""
        self.payload_bytes = 0
        """Bytes of answers' payloads (file bytes read, mostly), all programs together."""
        self._residents: dict[str, Resident] = {}
        self._missing: dict[str, tuple[Any, NoProgram]] = {}
        self._starting: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def request(
        self, python: str, head: dict[str, Any], payload: bytes, *, timeout: float
    ) -> Answer:
        """The answer to one request; a dead or hung program is replaced and asked again
        once. NoProgram when the host cannot run it; ProgramTimeout when the request ran
        past `timeout`."""
        asked = {**head, "timeout": timeout}
        for attempt in (1, 2):
            try:
                if self.calls == "exec":
                    answer = self._once(python, asked, payload, timeout)
                else:
                    answer = self._resident_answer(python, asked, payload, timeout)
            except ProgramGone as exc:
                if attempt == 2:
                    raise HostError(
                        f"{exc}, and again on a freshly started one; the request was not answered",
                        ErrorKind.HOST,
                    ) from exc
                continue
            with self._lock:
                self.payload_bytes += len(answer.payload)
            return answer
        raise AssertionError("unreachable")

    def mode(self, python: str) -> CallMode:
        """How requests reach files on this host: starts the program if needed."""
        try:
            self.request(python, {"op": "ping"}, b"", timeout=self.conn.io_timeout)
        except NoProgram:
            return "posix"
        return self.calls

    def why_not(self, python: str) -> str | None:
        """Why the program does not run for `python` on the current connection, if it does not."""
        with self._lock:
            transport, why = self._missing.get(python, (None, None))
        return str(why) if why is not None and transport is self.conn.transport else None

    def running(self, python: str) -> Resident | None:
        """The resident program for `python`, while one runs."""
        with self._lock:
            current = self._residents.get(python)
        return current if current is not None and not current.dead else None

    def reset(self) -> None:
        """The connection closed: its programs went with it; a new one asks again."""
        with self._lock:
            residents, self._residents = list(self._residents.values()), {}
        for resident in residents:
            resident.close()

    # -- resident --

    def _resident_answer(
        self, python: str, head: dict[str, Any], payload: bytes, timeout: float
    ) -> Answer:
        resident, fresh = self._resident(python)
        answer = resident.ask(head, payload, timeout)
        return Answer(answer.head, answer.payload, reconnected=fresh)

    def _resident(self, python: str) -> tuple[Resident, bool]:
        self._check_missing(python)
        with self._lock:
            starting = self._starting.setdefault(python, threading.Lock())
        with starting:
            with self._lock:
                current = self._residents.get(python)
            if current is not None and not current.dead:
                return current, False
            self._check_missing(python)
            resident = Resident(self.conn, self.run, python, self.name, self.wrap)
            try:
                _, fresh = self.conn.call(resident.start)
            except NoProgram as exc:
                with self._lock:
                    self._missing[python] = (self.conn.transport, exc)
                raise
            with self._lock:
                self._residents[python] = resident
                self.starts += 1
            return resident, fresh

    def _check_missing(self, python: str) -> None:
        with self._lock:
            transport, why = self._missing.get(python, (None, None))
        current = self.conn.transport
        if why is not None and transport is current and current is not None and current.is_active():
            raise why

    # -- exec --

    def _once(self, python: str, head: dict[str, Any], payload: bytes, timeout: float) -> Answer:
        self._check_missing(python)
        name = head.get("name")
        wanted = (name.removesuffix(".py"),) if head.get("op") == "program" and name else ()
        bundle = Bundle.of(tuple(m for m in MODULES if m in wanted))
        try:
            run = self.run(
                [*self.wrap, python, "-I", "-S", "-c", BOOT, "once"],
                timeout=timeout + GRACE_S,
                max_bytes=REPLY_CAP,
                stdin=bundle.stdin + frame({**head, "id": 1}, payload),
            )
        except HostError as exc:
            if exc.kind is not ErrorKind.COMMAND_NOT_FOUND:
                raise
            missing = NoProgram(f"{python} was not found on host {self.name!r}")
            with self._lock:
                self._missing[python] = (self.conn.transport, missing)
            raise missing from exc
        got = frames(run.stdout)
        if run.timed_out:
            raise ProgramTimeout()
        said = run.stderr.decode(errors="replace").strip().splitlines()
        detail = f"(exit {run.exit_code}): {said[-1] if said else 'no message'}"
        if not got:
            missing = NoProgram(
                f"Sleuth's program would not start on host {self.name!r} with {python} {detail}",
                ErrorKind.HOST,
            )
            with self._lock:
                self._missing[python] = (self.conn.transport, missing)
            raise missing
        check_hello(got[0][0], bundle, self.name)
        if len(got) < 2:
            raise ProgramGone(f"Sleuth's program on host {self.name!r} ended {detail}")
        return Answer(*got[1], reconnected=run.reconnected)
