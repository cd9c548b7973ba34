"""A server's secret environment values, kept out of everything launch_server and
server_status return.

A server may print its environment (a debug banner, `echo $HF_TOKEN`, a crash dump of its
settings), and a value printed without its name has no shape redaction could know. So the
values themselves are replaced wherever they appear: those of the launch's own `env` whose
name looks secret, and those of the server's whole environment as the host has it
(`/proc/PID/environ` while it runs; the host's own environment, which it inherited, after
it has ended). In the process that launched it, the launch's values are also registered
with the redactor, so every later output of that process hides them too.

Another process (a later `sleuth tool server_status`, a restarted `sleuth mcp`) cannot
read the launch's values once the server has ended, and they are never written down. What
is written, beside the server's log in its 0700 folder, is a fingerprint of each: its
length, its first two characters and a salted sha256, enough to recognise the value in a
log and to replace it, not to recover it.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.hosts.policy import SandboxedHost
from sleuth.transcripts.redact import register_secret
from sleuth.transcripts.secret_keys import secret_key_label
from sleuth.transcripts.secret_text import SECRET_NAME

LAUNCH_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
"""A name in the launch's own env whose value is scrubbed (the model chose the env, so the
test is broad: `TOKENIZERS_PARALLELISM` counts too)."""
SCRUBBED = "[REDACTED:launch-env]"
MIN_VALUE = 4
"""Shorter values would be replaced inside ordinary words and numbers."""
_PLAIN = re.compile(r"-?[0-9][0-9_.]*|(?i:true|false|yes|no|on|off|none|null)")
MAX_PIDS = 8


def _worth_hiding(value: str) -> bool:
    return len(value) >= MIN_VALUE and _PLAIN.fullmatch(value) is None


def launch_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of the launch's env under a name that looks secret."""
    return [v for k, v in env.items() if LAUNCH_SECRET_NAME.search(k) and _worth_hiding(v)]


NOT_SECRET = frozenset({"PWD", "OLDPWD"})
"""Names the key rules read as secret (`pwd`) that a shell sets to a folder."""


def inherited_secrets(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """The values of a process environment under a name the redactor calls secret
    (`HF_TOKEN`, `DB_PASSWORD`; not `TOKENIZERS_PARALLELISM`). A path is no secret
    (`SSH_AUTH_SOCK`, `XAUTHORITY` name files), and hiding one would hide it in every log."""
    return [
        value
        for name, value in pairs
        if name not in NOT_SECRET
        and (secret_key_label(name) or SECRET_NAME.fullmatch(name))
        and _worth_hiding(value)
        and not value.startswith("/")
    ]


class Fingerprint(BaseModel):
    """A secret value as written beside a server's log: recognisable, not recoverable."""

    length: int
    head: str
    sha256: str


class Fingerprints(BaseModel):
    salt: str
    values: list[Fingerprint]

    def find(self, text: str) -> list[tuple[int, int]]:
        """The spans of `text` that hold one of the values."""
        spans = []
        for value in self.values:
            at = text.find(value.head)
            while at >= 0:
                piece = text[at : at + value.length]
                if len(piece) == value.length and _digest(self.salt, piece) == value.sha256:
                    spans.append((at, at + value.length))
                at = text.find(value.head, at + 1)
        return spans


FINGERPRINTS = "env-fingerprints.json"
_WRITE = 'umask 077 && cat > "$1"'


def _digest(salt: str, value: str) -> str:
    return hashlib.sha256((salt + value).encode()).hexdigest()


def fingerprints(values: Iterable[str]) -> Fingerprints:
    salt = secrets.token_hex(16)
    found = [Fingerprint(length=len(v), head=v[:2], sha256=_digest(salt, v)) for v in values]
    return Fingerprints(salt=salt, values=found)


def remember(host: SandboxedHost, log: str, values: Iterable[str]) -> None:
    """Write the values' fingerprints beside the server's log (`log`'s folder)."""
    doc = fingerprints(values).model_dump_json().encode()
    host.run(["sh", "-c", _WRITE, "sleuth-env-fingerprints", _beside(log)], stdin=doc)


def recall(host: SandboxedHost, log: str) -> Fingerprints | None:
    """The fingerprints `remember` wrote for the server whose log is `log`, if any."""
    run = host.run(["cat", "--", _beside(log)], timeout=10)
    try:
        return Fingerprints.model_validate_json(run.stdout) if run.exit_code == 0 else None
    except ValidationError:
        return None


def _beside(log: str) -> str:
    return posixpath.join(posixpath.dirname(log), FINGERPRINTS)


@dataclass(frozen=True)
class Scrubber:
    """Replaces each of `values` (longest first), and each value `known` recognises,
    wherever it appears."""

    values: tuple[str, ...] = ()
    known: Fingerprints | None = None

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, SCRUBBED)
        if self.known is None:
            return text
        for start, end in sorted(self.known.find(text), reverse=True):
            text = text[:start] + SCRUBBED + text[end:]
        return text

    def data(self, obj: Any) -> Any:
        """The same in every string of JSON-like data, keys included."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {self.data(k): self.data(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.data(item) for item in obj]
        return obj


def process_env(host: SandboxedHost, pids: Iterable[int]) -> list[tuple[str, str]]:
    """The environment of each of `pids` on the host, and of a fresh command there (what a
    server inherits); a process that has ended or is not ours is skipped."""
    files = ["/proc/self/environ", *(f"/proc/{pid}/environ" for pid in list(pids)[:MAX_PIDS])]
    run = host.run(["cat", "--", *files], timeout=10)
    pairs = []
    for entry in run.stdout.split(b"\x00"):
        name, sep, value = entry.decode(errors="replace").partition("=")
        if sep and name:
            pairs.append((name, value))
    return pairs


def launch_scrubber(host: SandboxedHost, pid: int, log: str, env: Mapping[str, str]) -> Scrubber:
    """For the server this process just launched: its env's secret values (registered with
    the redactor and fingerprinted beside its log) and what else its environment holds."""
    values = set(inherited_secrets(process_env(host, [pid])))
    launched = launch_secrets(env)
    for value in launched:
        register_secret(value)
    if launched:
        remember(host, log, launched)
    return Scrubber(tuple(sorted(values | set(launched), key=len, reverse=True)))


def status_scrubber(host: SandboxedHost, pids: Iterable[int], log: str) -> Scrubber:
    """For a server another call launched: its running processes' environment, the host's,
    and the fingerprints its launch left beside its log."""
    values = inherited_secrets(process_env(host, pids))
    return Scrubber(tuple(sorted(set(values), key=len, reverse=True)), recall(host, log))
