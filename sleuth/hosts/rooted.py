"""The file reads of the tools, confined to a sandbox's roots: `sandbox.files`.

```python
lines = sandbox.files.read_lines(sandbox.resolve("src/model.py"), 1, 200, width=4097)
```

Where the host runs Sleuth's program (`program/resident.py`: resident for the connection,
or once per call on the exec path), every read is a request and the program opens the
path beneath an open directory of a root, one component at a time, never following a
symlink out: a link swapped between the check and the open cannot lead outside the roots.
On this machine, and on a host without Python, the same reads run as POSIX tools
(`posix_files.py`) on the path checked just before. Both give the same typed results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from sleuth.errors import ErrorKind, HostError
from sleuth.hosts import posix_files
from sleuth.hosts.host import RunResult, StatResult, kind_of, os_error_kind
from sleuth.hosts.replies import FIND_KINDS, DirEntry, GrepRun, LineRange, LinesAt, Listing
from sleuth.hosts.wire import (
    Answer,
    GrepHead,
    LinesAtHead,
    LinesHead,
    ListHead,
    NoProgram,
    ProgramTimeout,
    ReadHead,
    Refusal,
    ResolveHead,
    RootsHead,
    StatHead,
    failure,
)

if TYPE_CHECKING:
    from sleuth.hosts.policy import SandboxedHost

PROGRAM = "sleuth-program"
"""argv[0] of a request in what a tool records: it names Sleuth's program, not a command."""
Reply = TypeVar("Reply", bound=RunResult)
Head = TypeVar("Head", bound=BaseModel)
SERVED = frozenset({"checkpoint_probe.py", "secret_scan.py"})
"""Sleuth's file-reading programs that the host program runs itself, beneath the roots."""


class RootedFiles:
    """Reads beneath the roots of one sandboxed host."""

    def __init__(self, sandbox: SandboxedHost) -> None:
        self.sandbox = sandbox

    # -- one path --

    def realpath(self, path: str) -> str:
        """`path` with every symlink followed; Refusal when one leads out of the roots."""
        answer = self._ask("resolve", path)
        if answer is None:
            real = self.sandbox.host.realpath(path)
            if not self.sandbox.contains(real):
                raise Refusal("link")
            return real
        return self._ok(answer, path, "resolve", ResolveHead).real

    def stat(self, path: str) -> StatResult:
        """As Host.stat (a final symlink not followed), beneath the roots."""
        checked = self.sandbox.beneath(path)
        answer = self._ask("stat", checked)
        if answer is None:
            return self.sandbox.host.stat(checked)
        head = self._ok(answer, checked, "stat", StatHead)
        if head.mode is None:
            return StatResult(path=path, kind="missing")
        return StatResult(path=path, kind=kind_of(head.mode), size=head.size, mtime=head.mtime)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        checked = self.sandbox.beneath(path)
        answer = self._ask("read", checked, offset=offset, length=length)
        if answer is None:
            return self.sandbox.host.read_range(checked, offset, length)
        self._ok(answer, checked, "read", ReadHead)
        return answer.payload

    def read_lines(self, path: str, start: int, end: int, width: int) -> LineRange:
        """Lines START..END, each cut at `width` bytes, and the file's line count."""
        checked = self.sandbox.beneath(path)
        argv = [PROGRAM, "read_lines", checked, str(start), str(end)]
        posix = partial(posix_files.read_lines, self.sandbox.run, checked, start, end, width)
        answer = self._ask_or(
            LineRange, argv, checked, posix, start=start, end=end, line_bytes=width
        )
        if not isinstance(answer, Answer):
            return answer
        head = self._ok(answer, checked, "read", LinesHead)
        lines, at = [], 0
        for size in head.sizes:
            lines.append(answer.payload[at : at + size])
            at += size
        done = _done(argv, answer, head.cut)
        return LineRange(**done, lines=lines, total=head.total)

    def list_dir(self, path: str, depth: int) -> Listing:
        """The entries `depth` levels down, symlinks listed and not followed."""
        checked = self.sandbox.beneath(path)
        argv = [PROGRAM, "list_dir", checked, str(depth)]
        posix = partial(posix_files.list_dir, self.sandbox.run, checked, depth)
        answer = self._ask_or(Listing, argv, checked, posix, depth=depth)
        if not isinstance(answer, Answer):
            return answer
        head = self._ok(answer, checked, "list", ListHead)
        entries = [
            DirEntry(kind=FIND_KINDS.get(kind, "other"), size=size, name=name)
            for kind, size, name in head.entries
        ]
        done = _done(argv, answer, head.cut)
        if head.denied:  # as find says it, and with its exit status
            done["exit_code"] = 1
            done["stderr"] = "".join(
                f"find: '{checked}/{name}': Permission denied\n" for name in head.denied
            ).encode()
        return Listing(**done, entries=entries)

    def grep(
        self,
        path: str,
        flags: Sequence[str],
        include: str | None,
        pattern: str,
        *,
        max_count: int | None = None,
        max_bytes: int | None = None,
    ) -> GrepRun:
        """`grep -r -n -I` under `path` with match `flags` (-E, -F, -i), files whose name
        matches `include` only, at most `max_count` matches per file."""
        checked = self.sandbox.beneath(path)
        cap = self.sandbox.limits.max_output_bytes if max_bytes is None else max_bytes
        argv = [PROGRAM, "grep", *flags, "-e", pattern, "--", checked]
        posix = partial(
            posix_files.grep,
            self.sandbox.run,
            checked,
            flags,
            include,
            pattern,
            max_count,
            max_bytes,
        )
        answer = self._ask_or(
            GrepRun,
            argv,
            checked,
            posix,
            flags=list(flags),
            include=include,
            pattern=pattern,
            max_count=max_count,
            max_bytes=cap,
        )
        if not isinstance(answer, Answer):
            return answer
        head = self._ok(answer, checked, "search", GrepHead)
        done = _done(argv, answer, head.cut)
        done.update(exit_code=head.code, stderr=answer.payload)
        return GrepRun(**done, matches=head.matches)

    def lines_at(self, path: str, numbers: Iterable[int]) -> LinesAt:
        """The lines of `path` with these numbers."""
        checked = self.sandbox.beneath(path)
        wanted = sorted(set(numbers))
        argv = [PROGRAM, "lines_at", checked]
        posix = partial(posix_files.lines_at, self.sandbox.run, checked, wanted)
        answer = self._ask_or(LinesAt, argv, checked, posix, numbers=wanted)
        if not isinstance(answer, Answer):
            return answer
        head = self._ok(answer, checked, "read", LinesAtHead)
        return LinesAt(**_done(argv, answer, head.cut), lines=head.lines)

    # -- the roots themselves, and whole programs --

    def roots(self, paths: Sequence[str]) -> list[tuple[str, str, str | None]]:
        """(root, kind, real path) for each configured root; kind "symlink" or "missing"
        leaves the real path to the caller's judgement."""
        answer = self._ask_unconfined({"op": "roots", "paths": list(paths)})
        if answer is None:
            found: list[tuple[str, str, str | None]] = []
            for path in paths:
                kind = self.sandbox.host.stat(path).kind
                real = None if kind == "missing" else self.sandbox.host.realpath(path)
                found.append((path, kind, real))
            return found
        head = self._ok(answer, ", ".join(paths), "look at", RootsHead)
        return [(r.path, "missing" if not r.mode else kind_of(r.mode), r.real) for r in head.roots]

    def program(
        self, name: str, args: Sequence[str], python: str, timeout: float, max_bytes: int
    ) -> RunResult | None:
        """Sleuth's program `name` run by the host program, every open beneath the roots; its
        output as the program would print it. None where the host has no program."""
        argv = [python, PROGRAM, name, *args]
        head = {"op": "program", "name": name, "argv": list(args)}
        try:
            answer = self.sandbox.host.request(
                python, {**head, "roots": self.sandbox.real_roots}, timeout=timeout
            )
            problem = failure(answer)
        except NoProgram:
            return None
        except ProgramTimeout:
            return RunResult(**_timed_out(argv))
        if isinstance(problem, ProgramTimeout):
            return RunResult(**_timed_out(argv))
        if problem is not None:  # as a program that failed: its caller says so, or falls back
            said = str(problem).encode()
            return RunResult(argv=argv, exit_code=1, stdout=b"", stderr=said)
        out = answer.payload
        return RunResult(
            argv=argv,
            exit_code=0,
            stdout=out[:max_bytes],
            stderr=b"",
            stdout_cut=max(0, len(out) - max_bytes),
            reconnected=answer.reconnected,
        )

    # -- requests --

    def _ask(self, op: str, path: str, **args: Any) -> Answer | None:
        """The program's answer, or None where the host has none (then POSIX tools);
        ProgramTimeout when the request ran past its time."""
        answer = self._ask_unconfined(
            {"op": op, "roots": self.sandbox.real_roots, "path": path, **args}
        )
        if answer is not None and isinstance(failure(answer), ProgramTimeout):
            raise ProgramTimeout()
        return answer

    def _ask_or(
        self,
        reply: type[Reply],
        argv: list[str],
        path: str,
        without_program: Callable[[], Reply],
        **args: Any,
    ) -> Answer | Reply:
        """The program's answer to the read `argv` names (its output capped at the output
        limit unless `max_bytes` says otherwise); where the host has no program, the same
        read by POSIX tools; past its time, `reply` as a run that timed out."""
        args.setdefault("max_bytes", self.sandbox.limits.max_output_bytes)
        try:
            answer = self._ask(argv[1], path, **args)
        except ProgramTimeout:
            return reply(**_timed_out(argv))
        return without_program() if answer is None else answer

    def _ask_unconfined(self, head: dict[str, Any]) -> Answer | None:
        sandbox = self.sandbox
        try:
            return sandbox.host.request(
                sandbox.config.python, head, timeout=sandbox.limits.timeout_s
            )
        except NoProgram:
            return None

    def _ok(self, answer: Answer, path: str, action: str, head: type[Head]) -> Head:
        """The answer's header as `head`, or its failure raised as the tools expect it; a
        header of another shape is a HostError naming the host and the request."""
        problem = failure(answer)
        if problem is None:
            try:
                return head.model_validate(answer.head)
            except ValidationError as exc:
                raise HostError(
                    f"Sleuth's program on host {self.sandbox.name!r} answered a {action} of "
                    f"{path} in a shape Sleuth cannot read ({exc.errors()[0]['msg']}); the "
                    f"interpreter that runs it ({self.sandbox.config.python}) may not be a "
                    f"plain Python: set `python` under [hosts.{self.sandbox.name}] to one",
                    ErrorKind.HOST,
                ) from None
        if isinstance(problem, Refusal) and action != "resolve":
            raise self.sandbox.refusal(path, problem.how)
        if isinstance(problem, OSError):
            raise self._os_error(action, path, problem)
        raise problem

    def _os_error(self, action: str, path: str, exc: OSError) -> HostError:
        name = self.sandbox.name
        if action == "resolve" and isinstance(exc, FileNotFoundError | NotADirectoryError):
            return HostError(
                f"no such file or directory on host {name!r}: {path}", ErrorKind.NOT_FOUND
            )
        why = exc.strerror or str(exc) or type(exc).__name__
        return HostError(f"cannot {action} {path} on host {name!r}: {why}", os_error_kind(exc))


def _done(argv: list[str], answer: Answer, cut: int) -> dict[str, Any]:
    return {
        "argv": argv,
        "exit_code": 0,
        "stdout": b"",
        "stderr": b"",
        "stdout_cut": cut,
        "reconnected": answer.reconnected,
    }


def _timed_out(argv: list[str]) -> dict[str, Any]:
    return {"argv": argv, "exit_code": None, "stdout": b"", "stderr": b"", "timed_out": True}
