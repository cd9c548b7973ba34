"""Sleuth's resident program in a container whose runtime runs on this machine: the runtime's
`exec -i` as a local process, its pipes standing where an SSH channel stands for a remote
runtime (`ssh/program.py`'s `Link` and `Channel`).

```python
programs = HostPrograms(LocalLink(), host.run, "sglang0", "resident", wrap=exec_argv)
```
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
from collections.abc import Callable
from typing import IO, TypeVar

T = TypeVar("T")
CHANNELS = 64
CLOSE_GRACE_S = 2.0
"""How long a closed program may take to see its end of input and exit before it is killed."""


class _Here:
    """The "transport" of this machine: always up, so a program that will not start is
    remembered for the session."""

    def is_active(self) -> bool:
        return True


class PipeChannel:
    """A local process's stdin, stdout and stderr, read with `io_timeout` as a channel is."""

    def __init__(self, argv: list[str], io_timeout: float) -> None:
        self.io_timeout = io_timeout
        self.closed = False
        self.status_event = threading.Event()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                process_group=0,  # what a timeout kills; why not a session: LocalHost.run
            )
        except FileNotFoundError:
            self.proc = subprocess.Popen(["false"])  # an exit status for a missing runtime
            self.missing = True
        else:
            self.missing = False
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self) -> None:
        self.proc.wait()
        self.status_event.set()

    def sendall(self, data: bytes) -> None:
        if self.proc.stdin is None:
            raise BrokenPipeError("no input")
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, nbytes: int) -> bytes:
        return self._recv(self.proc.stdout, nbytes)

    def recv_stderr(self, nbytes: int) -> bytes:
        return self._recv(self.proc.stderr, nbytes)

    def _recv(self, stream: IO[bytes] | None, nbytes: int) -> bytes:
        if stream is None or self.closed:
            return b""
        try:
            ready, _, _ = select.select([stream], [], [], self.io_timeout)
        except (OSError, ValueError):  # closed under us
            return b""
        if not ready:
            raise TimeoutError("no output")
        try:
            return os.read(stream.fileno(), nbytes)
        except (OSError, ValueError):
            return b""

    def exit_status_ready(self) -> bool:
        return self.proc.poll() is not None

    def recv_exit_status(self) -> int:
        code = self.proc.wait()
        return 127 if self.missing else code

    def close(self) -> None:
        """End its input (the program exits at its end), and kill it if it lingers."""
        if self.closed:
            return
        self.closed = True
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

        def reap() -> None:
            try:
                self.proc.wait(CLOSE_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait()
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

        threading.Thread(target=reap, daemon=True).start()


class LocalLink:
    """This machine as the place programs start: no connection to make or lose."""

    def __init__(self, io_timeout: float = 20.0) -> None:
        self.io_timeout = io_timeout
        self.channels = threading.BoundedSemaphore(CHANNELS)
        self._here = _Here()

    @property
    def transport(self) -> _Here:
        return self._here

    def call(self, op: Callable[[_Here], T], *, retry: bool = True) -> tuple[T, bool]:
        return op(self._here), False

    def open_program(self, transport: _Here, argv: list[str]) -> PipeChannel:
        return PipeChannel(argv, self.io_timeout)
