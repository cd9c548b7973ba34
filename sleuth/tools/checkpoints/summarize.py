"""A checkpoint's summary, computed where the data is: the host's python3, in process, or SFTP.

The analysis lives in `sleuth.hosts.program.checkpoint_probe`, a stdlib-only program run
by this interpreter as a child process for the local host and sent to a remote host that
has python3; without python3 the same code runs here, in process, on headers fetched by
SFTP range reads. No byte of tensor data is ever read. checkpoint_summary and
capacity_plan both start here.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.errors import ErrorKind
from sleuth.hosts.host import HostError, LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import checkpoint_probe as probe
from sleuth.hosts.program import program
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.program_run import read_answer, unreadable
from sleuth.tools.results import ToolError

READ_THREADS = 16
PROBE_OUTPUT_CAP = 16 * 1024 * 1024
PROBE = "checkpoint_probe.py"


class ProbeAnswer(BaseModel):
    """checkpoint_probe.py's answer: the summary, or the error it refused with, or a crash."""

    ok: bool = False
    summary: dict[str, Any] | None = None
    error: str | None = None
    crash: str | None = None


def summarize(sandboxed: SandboxedHost, model_dir: str) -> CheckpointSummary:
    """Run the analysis where the data is: in-process, on the host's python3, or over SFTP.

    A slower path taken because the faster one failed is stated in `warnings`, with why.
    """
    if isinstance(sandboxed.host, LocalHost):
        # As its own process: it forks workers (unsafe in this threaded process) and its
        # ~0.2 GB of parsed headers go back to the OS when it exits.
        local = _on_host_python(sandboxed, model_dir, sys.executable, "local-python")
        if isinstance(local, CheckpointSummary):
            return local
        fs = probe.LocalFs(sandboxed.real_roots)
        raw = _analyse(lambda: probe.summarise(model_dir, fs))
        return _fell_back(_validated(raw, "in-process", raw["bytes_read"], None), local)
    remote = _on_host_python(sandboxed, model_dir, sandboxed.config.python, "host-python")
    if isinstance(remote, CheckpointSummary):
        return remote
    sftp = SftpFs(sandboxed)
    with ThreadPoolExecutor(READ_THREADS) as pool:
        raw = _analyse(lambda: probe.summarise(model_dir, sftp, pool.map))
    return _fell_back(_validated(raw, "sftp", sftp.bytes_read, sftp.bytes_read), remote)


def _fell_back(summary: CheckpointSummary, why: str) -> CheckpointSummary:
    summary.warnings.insert(0, f"fell back to the {summary.via} path (slower): {why}")
    return summary


def _analyse(run: Any) -> dict[str, Any]:
    try:
        result: dict[str, Any] = run()
    except probe.ProbeError as exc:
        raise ToolError(str(exc)) from None
    return result


def _on_host_python(
    sandboxed: SandboxedHost, model_dir: str, python: str, via: str
) -> CheckpointSummary | str:
    """The probe run by the host's python3, or why it could not be (the caller falls back)."""
    try:
        run = sandboxed.run_program(
            "checkpoint_probe.py",
            [model_dir, *sandboxed.real_roots],
            python=python,
            max_bytes=PROBE_OUTPUT_CAP,
        )
    except HostError as exc:
        if exc.kind is ErrorKind.COMMAND_NOT_FOUND:
            return f"{python} was not found on host {sandboxed.name!r}"
        raise
    if run.exit_code == 127:
        return f"{python} was not found on host {sandboxed.name!r} (exit 127)"
    if run.timed_out:
        raise ToolError(
            f"the checkpoint probe timed out on host {sandboxed.name!r}; raise "
            "[limits] timeout_s in sleuth.toml for very large checkpoints"
        )
    try:
        doc = json.loads(run.stdout)
    except ValueError:  # an interpreter too old or broken: the slower path still works
        tail = run.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"{python} on host {sandboxed.name!r} gave no answer (exit {run.exit_code}"
            + (f": {tail[-1][:200]}" if tail else "")
            + ")"
        )
    answer = read_answer(sandboxed.name, PROBE, doc, ProbeAnswer)
    if answer.crash:
        return f"the checkpoint probe failed on host {sandboxed.name!r}: {answer.crash}"
    if not answer.ok:
        raise ToolError(str(answer.error))
    raw = answer.summary or {}
    wire = None if via == "local-python" else len(program(PROBE)) + len(run.stdout)
    try:
        return _validated(raw, via, raw.get("bytes_read"), wire)
    except ValidationError as exc:
        raise unreadable(sandboxed.name, PROBE, exc) from None


def _validated(
    raw: dict[str, Any], via: str, host_bytes: int | None, wire: int | None
) -> CheckpointSummary:
    raw = {**raw, "via": via, "bytes_read_on_host": host_bytes, "bytes_over_wire": wire}
    raw.pop("bytes_read", None)
    return CheckpointSummary.model_validate(raw)


class SftpFs:
    """The probe's file interface over a sandboxed remote host: stat and range reads."""

    def __init__(self, sandboxed: SandboxedHost) -> None:
        self.sandboxed = sandboxed
        self.bytes_read = 0

    def size(self, path: str) -> int | None:
        st = self.sandboxed.files.stat(path)
        if st.kind == "symlink":  # follow it only where the policy allows
            try:
                st = self.sandboxed.files.stat(self.sandboxed.resolve(path))
            except ToolError as exc:
                if exc.kind is ErrorKind.NOT_FOUND:
                    return None
                raise probe.ProbeError(str(exc)) from None
        return None if st.kind == "missing" else st.size

    def read(self, path: str, offset: int, length: int) -> bytes:
        data = self.sandboxed.files.read_range(path, offset, length)
        self.bytes_read += len(data)
        return data
