"""grep that matches what is shown: the pattern is judged against the redacted line.

A search over the raw files is an oracle: `password": "h`, then `password": "hu`, …
would spell out a secret one character at a time from which searches match, even
though every line shown is redacted. So the lines a secret could sit on are found
first, by a fixed search (`SHADOW`, the same whatever the model asked) plus the
by-key scan of the files it names, and each such line is judged only in its
redacted form. The output is then a function of the redacted files alone: a right
and a wrong guess read alike. A raw match on a line that redaction changes but the
fixed search did not foresee is never shown.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from sleuth.hosts.host import RunResult
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.program import secret_scan
from sleuth.tools.files.keyed_secrets import scan_paths
from sleuth.tools.program_run import last_stderr_line
from sleuth.tools.results import ToolError
from sleuth.transcripts.redact import redact


def _ci(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# A value that is not a number, or none on this line (a YAML parent or block follows).
_VALUE = r"[:=]([[:space:]]*[\"']?[^0-9[:space:]]|[[:space:]]*$)"
_ASSIGNED = r"[A-Za-z0-9_\"'-]*[[:space:]]*" + _VALUE
# A name written with escapes (`pass\u0077ord`, `pass%77ord`) or in letters outside ASCII
# (fullwidth `ｐａｓｓ`): its words are not in the line as written.
_ODD_NAME = r"[-A-Za-z0-9_.%\\]*[\"']?[[:space:]]*" + _VALUE
_ODD_NAMES = [
    r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2})" + _ODD_NAME,
    "%[0-9a-fA-F]{2}" + _ODD_NAME,
    "[^\t -~]" + _ODD_NAME,
]
SHADOW = "|".join(
    [
        *(_ci(w) for w in ("passw", "passp", "pwd", "secret", "cred", "auth", "bearer", "cookie")),
        *(_ci(w) + "[\"']?[[:space:]]*[:=]" for w in ("pass", "psk")),
        *(
            _ci(w) + "[^A-Za-z0-9]?" + _ci("key")
            for w in ("api", "access", "private", "client", "signing", "ssh", "encryption")
        ),
        _ci("account") + "[^A-Za-z0-9]?" + _ci("key"),
        *(_ci(w) + _ASSIGNED for w in ("token", "session")),
        *("<[^>]*" + _ci(w) for w in ("token", "session")),
        "(KEY|_PAT)[\"']?[[:space:]]*[:=]",
        *_ODD_NAMES,
        r"^\[",
        "-----BEGIN",
        "sk-",
        "hf_",
        "A[KS]IA",
        "gh[pousr]_",
        "github_pat_",
        "xox[abprs]-",
        "hooks\\.slack\\.com/services/",
        "AIza",
        "[sr]k_(live|test)_",
        "glpat-",
        "npm_",
        "eyJ",
        ":[^[:space:]?#\"'<>]*@",
        "[?&][-A-Za-z0-9_.%]+=[^&#[:space:]]",
        "--[-A-Za-z0-9_.]*(" + _ci("token") + "|" + _ci("session") + ")[[:space:]]",
        "[=:\"'][[:space:]]*[\"']?[A-Za-z0-9+/_-]{24,}",
    ]
)
"""Every line redaction may change matches this (extended regex, fixed): the secret
shapes of `sleuth.transcripts.secret_text` (URL authorities, query parameters, flags), its
secret names beside a value, names written with escapes, the key words of the by-key rules
anywhere (a YAML parent `auth:`), section headers and long tokens."""

SHADOW_CAP = 32 << 20

Hit = tuple[str, int]


@dataclass
class Found:
    matches: list[tuple[str, int, str]] = field(default_factory=list)
    """(file, line, shown text), sorted."""
    hidden: int = 0
    """Lines holding redacted values that the pattern did not match once redacted."""
    raw_cut: int = 0
    unscanned: list[str] = field(default_factory=list)
    """Configuration files too big to check for secrets by key: not searched."""
    argv: list[list[str]] = field(default_factory=list)
    """The grep commands run on the host (the scan program's run is not listed)."""


def _check(run: RunResult, path: str, failure: type[Exception], explain: str) -> None:
    if run.timed_out or run.exit_code not in (0, 1):
        raise failure(
            f"{explain} failed on {path} (exit {run.exit_code}"
            f"{', timed out' if run.timed_out else ''}): {last_stderr_line(run.stderr)}"
        )


def search(
    sandbox: SandboxedHost,
    path: str,
    match_flags: Sequence[str],
    include: str | None,
    pattern: str,
    max_matches: int,
    timeout: float,
) -> Found:
    """Lines under `path` whose redacted form matches `pattern` (grep `match_flags`, e.g.
    ["-E", "-i"]); `include` narrows the files by name (e.g. "*.py")."""
    raw = sandbox.files.grep(path, match_flags, include, pattern, max_count=max_matches)
    _check(raw, path, ToolError, "grep")
    shadow = sandbox.files.grep(path, ["-E"], include, SHADOW, max_bytes=SHADOW_CAP)
    _check(shadow, path, ToolError, "the search for lines holding secrets")
    if shadow.stdout_cut:
        raise ToolError(
            f"more than {SHADOW_CAP >> 20} MiB of lines under {path} may hold secrets, too many "
            "to search safely; narrow the path or set include_glob"
        )
    raw_hits = raw.matches
    shadow_hits = shadow.matches
    # Only files the fixed search points at can hold a secret by key (their key line
    # matches it); they are scanned whole, since a block scalar's lines carry no key.
    # Files that hold passwords by position (.pgpass) carry no key: their hits are scanned
    # only to be dropped, so that whether they matched never shows.
    foreseen = {name for name, _, _ in shadow_hits}
    positional = {name for name, _, _ in raw_hits if _positional(name)} - foreseen
    # Source code is scanned for private-key blocks only, so only where one begins.
    pem = {name for name, _, text in shadow_hits if "-----BEGIN" in text}
    scanned = {name for name in foreseen if not _is_code(name) or name in pem}
    keyed = scan_paths(sandbox, sorted(scanned | positional), timeout)
    unscanned = {name for name, lines in keyed.items() if lines is None}
    dropped = {(name, n) for name in positional for n in keyed.get(name) or {}}
    secret: dict[Hit, str] = {}
    for name, number, text in shadow_hits:
        shown = redact((keyed.get(name) or {}).get(number, text))
        if shown != text and name not in unscanned:
            secret[(name, number)] = shown
    for name in foreseen:
        for number, text in (keyed.get(name) or {}).items():
            secret[(name, number)] = redact(text)
    found = Found(raw_cut=raw.stdout_cut, unscanned=sorted(unscanned), argv=[raw.argv, shadow.argv])
    for name, number, text in raw_hits:
        hidden = (name, number) in secret or (name, number) in dropped
        if not hidden and name not in unscanned and redact(text) == text:
            found.matches.append((name, number, text))
    judged = sorted(secret)
    kept = _rematch(sandbox, match_flags, pattern, [secret[hit] for hit in judged], found.argv)
    for i, (name, number) in enumerate(judged):
        if i in kept:
            found.matches.append((name, number, secret[(name, number)]))
    found.hidden = len(judged) - len(kept)
    found.matches.sort()
    found.matches = _per_file(found.matches, max_matches)
    return found


def _is_code(path: str) -> bool:
    return posixpath.splitext(path)[1].lower() in secret_scan.CODE_SUFFIXES


def _positional(path: str) -> bool:
    return posixpath.basename(path).lstrip("._") in secret_scan.COLON_FILES


def _rematch(
    sandbox: SandboxedHost,
    match_flags: Sequence[str],
    pattern: str,
    texts: list[str],
    argv: list[list[str]],
) -> set[int]:
    """Indices of `texts` the pattern matches, by the host's own grep (same dialect)."""
    if not texts:
        return set()
    stdin = "".join(text.replace("\n", " ") + "\n" for text in texts).encode()
    run = sandbox.run(["grep", "-n", "--color=never", *match_flags, "-e", pattern], stdin=stdin)
    _check(run, "the redacted lines", ToolError, "grep")
    argv.append(run.argv)
    kept = set()
    for line in run.stdout.split(b"\n"):
        number, colon, _ = line.partition(b":")
        if colon and number.isdigit():
            kept.add(int(number) - 1)
    return kept


def _per_file(matches: list[tuple[str, int, str]], limit: int) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    seen: dict[str, int] = {}
    for match in matches:
        seen[match[0]] = seen.get(match[0], 0) + 1
        if seen[match[0]] <= limit:
            out.append(match)
    return out


def context_lines(
    sandbox: SandboxedHost, found: Found, context: int, timeout: float
) -> dict[Hit, str]:
    """The lines within `context` of each match, redacted, keyed by (file, line)."""
    wanted: dict[str, set[int]] = {}
    for name, at, _ in found.matches:
        lines = wanted.setdefault(name, set())
        lines.update(range(max(1, at - context), at + context + 1))
    keyed = scan_paths(sandbox, sorted(wanted), timeout) if wanted else {}
    out: dict[Hit, str] = {}
    for name, lines in sorted(wanted.items()):
        if "\n" in name or "\r" in name:
            # No POSIX tool takes such a name as an argument, so its matches stand alone on
            # every path, and the output is the same whichever path served the call.
            continue
        run = sandbox.files.lines_at(name, lines)
        _check(run, name, ToolError, "reading context")
        for n, text in run.lines.items():
            out[(name, n)] = redact((keyed.get(name) or {}).get(n, text))
    return out
