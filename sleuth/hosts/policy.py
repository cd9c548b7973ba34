"""The sandbox: roots, argument hygiene and limits.

Every path a tool touches is resolved on its host (symlinks followed) and must
lie inside one of the host's roots. Commands are argument vectors; an argument
holding NUL or a newline is refused before anything runs.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from sleuth.config import HostConfig, Limits
from sleuth.errors import ErrorKind, ToolError
from sleuth.hosts.host import Host, HostError, RunResult
from sleuth.hosts.program import SECRET_RUNNER, program, with_secrets


class PolicyError(ToolError):
    """The sandbox refused; the message says why and how to widen it if that is intended."""

    default_kind = ErrorKind.POLICY


def check_arg(value: str, what: str = "argument") -> str:
    if "\x00" in value or "\n" in value or "\r" in value:
        raise PolicyError(f"{what} {value!r} contains NUL or a line break; refused")
    return value


class SandboxedHost:
    """A host seen through its policy: only paths inside its roots, only capped commands."""

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
        self._real_roots: list[str] | None = None

    @property
    def real_roots(self) -> list[str]:
        """The configured roots as the host resolves them. A root that is a symlink is refused."""
        if self._real_roots is None:
            resolved = []
            for root in self.config.roots:
                st = self.host.stat(root)
                if st.kind == "symlink":
                    target = self.host.realpath(root)
                    raise PolicyError(
                        f"root {root} on host {self.name!r} is a symlink to {target}; a root "
                        f"must be a real folder so a changed link cannot widen it. Put "
                        f"{target!r} in `roots` of [hosts.{self.name}] in {self.config_source}"
                    )
                if st.kind == "missing":
                    continue
                resolved.append(self.host.realpath(root))
            self._real_roots = resolved
        return self._real_roots

    def resolve(self, path: str) -> str:
        """Resolve `path` on the host; relative paths are taken from the first root."""
        check_arg(path, "path")
        if not path:
            raise PolicyError("empty path; give a path inside " + self._roots_text())
        base = self.config.roots[0] if self.config.roots else "/"
        joined = posixpath.normpath(posixpath.join(base, path))
        try:
            real = self.host.realpath(joined)
        except HostError as exc:
            # Refuse before revealing whether something outside the roots exists.
            if not self.contains(posixpath.normpath(joined)):
                raise self._outside(path, joined, True) from exc
            raise ToolError(str(exc), exc.kind) from exc
        if not self.contains(real):
            raise self._outside(path, real, self.host.stat(real).kind == "dir")
        return real

    def contains(self, real: str) -> bool:
        """Whether a resolved path lies inside one of the roots."""
        return any(
            real == root or real.startswith(root.rstrip("/") + "/") for root in self.real_roots
        )

    def _roots_text(self) -> str:
        return ", ".join(self.real_roots or self.config.roots) or "(no roots)"

    def _outside(self, asked: str, real: str, is_dir: bool) -> PolicyError:
        """The refusal, with the one root that would allow exactly this path: the folder itself,
        or the file's own folder; never a wider parent (not `/` for `/etc`). A path that does
        not resolve is taken as the folder asked for."""
        shown = asked if asked == real else f"{asked} (resolves to {real})"
        widened = [*self.config.roots, real if is_dir else posixpath.dirname(real) or "/"]
        return PolicyError(
            f"{shown} is outside the roots of host {self.name!r}: {self._roots_text()}. "
            f"To allow it, set `roots = {widened!r}` under [hosts.{self.name}] in "
            f"{self.config_source}"
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
        (header values, tokens) follow it on stdin, never on the command line."""
        head = ["-c", SECRET_RUNNER] if secrets is not None else ["-"]
        return self.run(
            [python or self.config.python, *head, *args],
            stdin=with_secrets(name, secrets) if secrets is not None else program(name),
            timeout=timeout,
            max_bytes=max_bytes,
            retry=retry,
        )

    def check_allowed(self, tool: str) -> None:
        if tool not in self.config.allow:
            allow = [*self.config.allow, tool]
            raise PolicyError(
                f"{tool} changes the host and is not allowed on host {self.name!r}. To permit "
                f"it, set `allow = {allow!r}` under [hosts.{self.name}] in {self.config_source}"
            )
