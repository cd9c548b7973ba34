"""The sandbox: roots, argument hygiene and limits.

Every path a tool touches is resolved on its host (symlinks followed) and must
lie inside one of the host's roots; the tools read through `files`, which opens
each path beneath the roots again (`rooted.py`). Commands are argument vectors;
an argument holding NUL or a newline is refused before anything runs.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.config import HostConfig, Limits
from sleuth.config.containers import MUTATING_REFUSED
from sleuth.errors import ErrorKind, ToolError
from sleuth.hosts.host import Host, HostError, RunResult
from sleuth.hosts.program import SECRET_RUNNER, program, with_secrets
from sleuth.hosts.rooted import SERVED, RootedFiles
from sleuth.hosts.wire import ProgramTimeout, Refusal


class PolicyError(ToolError):
    """The sandbox refused; the message says why and how to widen it if that is intended."""

    default_kind = ErrorKind.POLICY


def check_arg(value: str, what: str = "argument") -> str:
    if "\x00" in value or "\n" in value or "\r" in value:
        raise PolicyError(f"{what} {value!r} contains NUL or a line break; refused")
    return value


class SandboxedHost:
    """A host seen through its policy: only paths inside its roots, only capped commands.

    `files` reads beneath the roots (`rooted.py`); `resolve` checks a path the user or the
    model gave and says where it really is.
    """

    def __init__(
        self,
        name: str,
        host: Host,
        config: HostConfig,
        limits: Limits,
        config_source: str | None = None,
    ) -> None:
        self.name, self.host, self.config, self.limits = name, host, config, limits
        self.config_source = config_source or "sleuth.toml"
        self.files = RootedFiles(self)
        self._roots: list[tuple[str, str]] | None = None

    @property
    def real_roots(self) -> list[str]:
        """The configured roots as the host resolves them. A root that is a symlink is refused."""
        return [real for _, real in self._root_pairs()]

    def roots_as_resolved(self) -> list[str]:
        """Each configured root as the host resolves it (as written where it is missing): a
        run's header. One request to the host's program, or without one a realpath each."""
        try:
            return [real or root for root, _, real in self.files.roots(self.config.roots)]
        except (HostError, ProgramTimeout):
            return [self._realpath_or_same(root) for root in self.config.roots]

    def _realpath_or_same(self, root: str) -> str:
        try:
            return self.host.realpath(root)
        except HostError:
            return root

    def _root_pairs(self) -> list[tuple[str, str]]:
        """(as configured, as resolved) for each root that exists."""
        if self._roots is None:
            pairs = []
            for root, kind, real in self.files.roots(self.config.roots):
                if kind == "symlink":
                    raise PolicyError(
                        f"root {root} on host {self.name!r} is a symlink to {real}; a root "
                        f"must be a real folder so a changed link cannot widen it. Put "
                        f"{real!r} in `roots` of [hosts.{self.name}] in {self.config_source}"
                    )
                if kind != "missing" and real is not None:
                    pairs.append((root, real))
            self._roots = pairs
        return self._roots

    def resolve(self, path: str, *, folder: bool = False) -> str:
        """Where `path` really is, symlinks followed, refused unless it lies inside the roots.

        A relative path is taken from the first root as configured (`roots[0]`). A path that
        is outside the roots as written is refused without looking at the host, so the
        refusal is the same whether it exists or not; one that leads out through a symlink
        is refused without saying where the link leads. `folder` says the caller wants a
        folder, so a refusal suggests the folder itself as a root, not its parent.
        """
        check_arg(path, "path")
        if not path:
            raise PolicyError("empty path; give a path inside " + self._roots_text())
        base = self.config.roots[0] if self.config.roots else "/"
        joined = posixpath.normpath(posixpath.join(base, path))
        inside = self.beneath(joined, asked=path, folder=folder)
        try:
            return self.files.realpath(inside)
        except Refusal as exc:
            raise self.refusal(path, exc.how, folder=folder, joined=joined) from None
        except HostError as exc:
            raise ToolError(str(exc), exc.kind) from exc

    def beneath(self, path: str, *, asked: str | None = None, folder: bool = False) -> str:
        """`path` (absolute) if it lies inside a root as written, a root's configured
        spelling replaced by its real one; else the refusal, with nothing looked up."""
        for configured, real in self._root_pairs():
            for spelled in dict.fromkeys([real, configured.rstrip("/") or "/"]):
                if path == spelled or path.startswith(spelled.rstrip("/") + "/"):
                    return real + path[len(spelled) :] if path != spelled else real
        raise self.refusal(asked or path, "outside", folder=folder, joined=path)

    def contains(self, real: str) -> bool:
        """Whether a resolved path lies inside one of the roots."""
        return any(
            real == root or real.startswith(root.rstrip("/") + "/") for root in self.real_roots
        )

    def _roots_text(self) -> str:
        return ", ".join(self.real_roots or self.config.roots) or "(no roots)"

    def refusal(
        self, asked: str, how: str, *, folder: bool = False, joined: str | None = None
    ) -> PolicyError:
        """Outside the roots as written (`how` "outside"), with the one root that would allow
        exactly that path: the folder itself, or a file's own folder, never a wider parent;
        or through a symlink (`how` "link"), whose target is never said."""
        where = self._roots_text()
        to = f"under [hosts.{self.name}] in {self.config_source}"
        if how == "link":
            return PolicyError(
                f"{asked} leads outside the roots of host {self.name!r} through a symlink: "
                f"{where}. Where the link leads is not shown. To allow it, add the folder it "
                f"leads to to `roots` {to}"
            )
        lexical = joined or asked
        shown = asked if asked == lexical else f"{asked} ({lexical})"
        widened = [*self.config.roots, lexical if folder else posixpath.dirname(lexical) or "/"]
        return PolicyError(
            f"{shown} is outside the roots of host {self.name!r}: {where}. To allow it, set "
            f"`roots = {widened!r}` {to}"
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        max_bytes: int | None = None,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> RunResult:
        for arg in argv:
            check_arg(arg)
        return self.host.run(
            argv,
            timeout=self.limits.timeout_s if timeout is None else timeout,
            max_bytes=self.limits.max_output_bytes if max_bytes is None else max_bytes,
            stdin=stdin,
            retry=retry,
        )

    def run_program(
        self,
        name: str,
        args: Sequence[str],
        *,
        python: str | None = None,
        timeout: float | None = None,
        max_bytes: int | None = None,
        retry: bool = True,
        secrets: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run Sleuth's program `name` (sleuth/hosts/program/) with the host's python, or with
        `python`; its source goes in on stdin, so a model never supplies code. `secrets`
        (header values, tokens) follow it on stdin, never on the command line. The programs
        that read files (`rooted.SERVED`) run inside Sleuth's host program where it runs,
        every open beneath the roots."""
        if secrets is None and name in SERVED:
            served = self.files.program(
                name,
                args,
                python or self.config.python,
                self.limits.timeout_s if timeout is None else timeout,
                self.limits.max_output_bytes if max_bytes is None else max_bytes,
            )
            if served is not None:
                return served
        head = ["-c", SECRET_RUNNER] if secrets is not None else ["-"]
        return self.run(
            [python or self.config.python, *head, *args],
            stdin=with_secrets(name, secrets) if secrets is not None else program(name),
            timeout=timeout,
            max_bytes=max_bytes,
            retry=retry,
        )

    def check_allowed(self, tool: str) -> None:
        if self.config.via is not None and tool in MUTATING_REFUSED:
            raise PolicyError(
                f"{tool} is refused on host {self.name!r}: it is a container or pod reached "
                f"through {self.config.via!r}, and Sleuth does not start, stop or restart "
                "someone else's container or pod. Ask its owner, or use its runtime yourself"
            )
        if tool not in self.config.allow:
            allow = [*self.config.allow, tool]
            raise PolicyError(
                f"{tool} changes the host and is not allowed on host {self.name!r}. To permit "
                f"it, set `allow = {allow!r}` under [hosts.{self.name}] in {self.config_source}"
            )
