"""A server's secret environment values, kept out of everything launch_server and
server_status return.

A server may print its environment (a debug banner, `echo $HF_TOKEN`, a crash dump of its
settings), and a value printed without its name has no shape redaction could know. So the
values themselves are replaced wherever they appear: those of the launch's own `env` whose
name looks secret, and those of the server's whole environment as the host has it
(`/proc/PID/environ` while it runs; the host's own environment, which it inherited, after
it has ended). In the process that launched it, the launch's values are also registered
with the redactor, so every later output of that process hides them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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


def inherited_secrets(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """The values of a process environment under a name the redactor calls secret
    (`HF_TOKEN`, `DB_PASSWORD`; not `TOKENIZERS_PARALLELISM`)."""
    return [
        value
        for name, value in pairs
        if (secret_key_label(name) or SECRET_NAME.fullmatch(name)) and _worth_hiding(value)
    ]


@dataclass(frozen=True)
class Scrubber:
    """Replaces each of `values` (longest first) wherever it appears."""

    values: tuple[str, ...] = ()

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, SCRUBBED)
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


def scrubber(
    host: SandboxedHost, pids: Iterable[int], env: Mapping[str, str] | None = None
) -> Scrubber:
    """A Scrubber for a server: `env` is the launch's own, when this process launched it."""
    values = set(inherited_secrets(process_env(host, pids)))
    if env is not None:
        for value in launch_secrets(env):
            register_secret(value)
            values.add(value)
    return Scrubber(tuple(sorted(values, key=len, reverse=True)))
