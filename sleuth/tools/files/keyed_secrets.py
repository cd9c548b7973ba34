"""Secrets found by key path in structured files, for the line-based tools.

`read_lines` shows a range of lines and `grep` single lines, so a value on a line
without its key (a YAML block scalar, an INI continuation, a pretty-printed JSON
array under `"tokens"`) cannot be told from ordinary text by looking at that line.
The whole file is scanned where it lives, by Sleuth's fixed program
`hosts/program/secret_scan.py` (in-process for this machine; over SFTP, scanned
here, for a host without python3), and only the lines that change come back.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence

from pydantic import BaseModel

from sleuth.hosts.host import HostError, LocalHost, read_whole
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import secret_scan
from sleuth.tools.program_run import read_answer
from sleuth.tools.results import ToolError
from sleuth.transcripts.secret_keys import (
    KEY_ESCAPES,
    KEY_RULES,
    KEY_STEMS,
    KEY_WORDS,
    SOFT_LABELS,
    SQUASHED_RULE,
)

RULES = json.dumps(
    {
        "words": KEY_WORDS,
        "rules": KEY_RULES,
        "squashed": SQUASHED_RULE,
        "escapes": KEY_ESCAPES,
        "soft": sorted(SOFT_LABELS),
        "stems": KEY_STEMS,
    }
)
_RULES = secret_scan.Rules(json.loads(RULES))

# Files that are configuration by name: too big to scan means their lines are not shown.
STRUCTURED_SUFFIXES = frozenset(
    [
        ".json",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".properties",
    ]
)


class ScanEntry(BaseModel):
    """secret_scan.py's answer for one file: its changed lines, or why it has none."""

    lines: dict[int, str] | None = None
    error: str | None = None


class ScanAnswer(BaseModel):
    files: dict[str, ScanEntry]


Redacted = dict[int, str]
"""Line number -> the line with its by-key secrets replaced; only changed lines."""
Scanned = dict[str, Redacted | None]
"""Per path; None for a configuration file too big to scan, whose lines must not be shown."""


def _must_scan(path: str) -> bool:
    name = posixpath.basename(path).lower()
    return posixpath.splitext(name)[1] in STRUCTURED_SUFFIXES or name.startswith(".env")


def too_big(path: str) -> ToolError:
    return ToolError(
        f"{path} is over {secret_scan.MAX_SCAN_BYTES // (1 << 20)} MiB, too big to check for "
        "secrets by key, so its lines are not shown; read_json reads big JSON files"
    )


def scan_paths(
    sandbox: SandboxedHost, paths: Sequence[str], timeout: float | None = None
) -> Scanned:
    """By-key (and private-key block) redactions for each of `paths`, resolved and inside
    the roots."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    # A name holding a line break cannot be a program's argument (see check_arg): such a
    # file is read through `sandbox.files` (the host program, or SFTP) and scanned here.
    odd = [p for p in wanted if "\n" in p or "\r" in p]
    found: Scanned | None = None
    if not isinstance(sandbox.host, LocalHost):
        found = _on_host(sandbox, [p for p in wanted if p not in odd], timeout)
    if found is None:
        found = {p: _here(sandbox, p, timeout) for p in wanted}
    return found | {p: _here(sandbox, p, timeout) for p in odd if p not in found}


def _here(sandbox: SandboxedHost, path: str, timeout: float | None) -> Redacted | None:
    """Read the file beneath the roots (`sandbox.files`) and scan it in this process."""
    size = sandbox.files.stat(path).size
    if size > secret_scan.MAX_SCAN_BYTES:
        return None if _must_scan(path) else {}
    raw = read_whole(sandbox.files, path, size=size, timeout=timeout)
    found = secret_scan.scan_bytes(raw, path, _RULES)
    # As the program's JSON answer would carry them: bytes that are not UTF-8 replaced.
    return {
        n: text.encode(errors="surrogateescape").decode(errors="replace")
        for n, text in found.items()
    }


def _on_host(sandbox: SandboxedHost, paths: list[str], timeout: float | None) -> Scanned | None:
    """The scan run by the host's python3; None when it has none that works."""
    if not paths:
        return {}
    try:
        run = sandbox.run_program(
            "secret_scan.py", [RULES, *paths], timeout=timeout, max_bytes=64 << 20
        )
    except HostError:
        return None
    if run.exit_code != 0 or run.stdout_cut:
        return None
    try:
        doc = json.loads(run.stdout)
    except ValueError:  # no JSON at all: a python3 that does not work; scanned here
        return None
    answer = read_answer(sandbox.name, "secret_scan.py", doc, ScanAnswer)
    out: Scanned = {}
    for path in paths:
        entry = answer.files.get(path, ScanEntry())
        if entry.lines is not None:
            out[path] = entry.lines
        elif entry.error == "too-big":
            out[path] = None if _must_scan(path) else {}
        else:
            raise ToolError(f"cannot check {path} for secrets: {entry.error or 'no answer'}")
    return out
