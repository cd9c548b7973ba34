"""Secret redaction, applied before anything is written to a transcript or shown to a model.

    >>> redact("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01234567")
    'export HF_TOKEN=[REDACTED:huggingface-token]'

Every replacement names the kind of secret that was there. The patterns are
deliberately anchored on shapes real credentials have (prefixes, lengths,
`NAME=value` context), so ordinary investigation output such as tensor names,
sha256 digests and git commit ids passes through untouched.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

# Secret-looking names: any UPPER_CASE (env-var style) name ending in one of
# these words, or a lower/mixed-case name ending in an unambiguous secret word.
# `bos_token`, `pad_token` and plain `key` are everywhere in tokenizer and
# checkpoint configs, so bare lower-case TOKEN/KEY do not count.
_UPPER_NAME = r"[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS|_PAT)"
_LOWER_NAME = (
    r"(?i:[a-z0-9_.-]*(?:api[_-]?key|secret[_-]?key|access[_-]?key|private[_-]?key"
    r"|auth[_-]?token|access[_-]?token|refresh[_-]?token|api[_-]?token|hf[_-]?token"
    r"|client[_-]?secret|secret|password|passwd|credentials))"
)
_SECRET_NAME = re.compile(rf"(?:{_UPPER_NAME}|{_LOWER_NAME})")

# (kind, pattern), applied in order. A pattern may hold a group named `keep`
# (context kept verbatim) before the secret itself. Each starts with a literal
# so the regex engine can skip ahead: a 64 KB output is scanned in about a
# millisecond. Lookbehinds sit after the literal for the same reason.
_PATTERNS: list[tuple[str, str]] = [
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*\Z)",
    ),
    ("anthropic-key", r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"sk-(?<![A-Za-z0-9_-]sk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("huggingface-token", r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
    ("aws-access-key-id", r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("github-token", r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{36,}"),
    ("github-token", r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}"),
    ("slack-token", r"xox(?<![A-Za-z0-9_]xox)[abprs]-[A-Za-z0-9-]{10,}"),
    ("bearer-token", r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9._~+/-]{16,}=*"),
    ("url-password", r"(?P<keep>://[^\s:/@\"'<>]+:)[^\s@/\"'<>]+(?=@)"),
    (
        "aws-secret-key",
        r"(?P<keep>(?i:aws_secret_access_key)[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}"
        r"(?![A-Za-z0-9/+=])",
    ),
]
_COMPILED = [(kind, re.compile(pattern)) for kind, pattern in _PATTERNS]
# Case-insensitive patterns cannot skip ahead; run them only when a cheap
# substring test says they might match.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "bearer-token": ("earer", "EARER"),
    "aws-secret-key": ("ecret_access_key", "ECRET_ACCESS_KEY", "ecret_Access_Key"),
}

# Secret-named assignments are found from the name's last word backwards,
# since a pattern starting at every identifier is ten times slower.
_NAME_TAIL = re.compile(
    r"[yYnNtTdDsS](?<=(?i:key|ken|ret|swd|ord|als|pat))(?P<sep>[\"']?[ \t]*[=:][ \t]*)"
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_QUOTED_VALUE = {q: re.compile(rf"(?:[^{q}\n\\]|\\.)+") for q in "\"'"}
_BARE_VALUE = re.compile(r"[^\s\"',;}\]]+")


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _substitute(pattern: re.Pattern[str], marker: str, text: str) -> str:
    if "keep" in pattern.groupindex:
        return pattern.sub(lambda m: m.group("keep") + marker, text)
    return pattern.sub(marker, text)


def _name_start(text: str, end: int) -> int:
    start = end
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return start


def _value_span(text: str, pos: int) -> tuple[int, int] | None:
    quote = text[pos : pos + 1]
    if quote in _QUOTED_VALUE:
        match = _QUOTED_VALUE[quote].match(text, pos + 1)
    else:
        match = _BARE_VALUE.match(text, pos)
    return match.span() if match else None


def _redact_assignments(text: str) -> str:
    pieces: list[str] = []
    done = 0
    for match in _NAME_TAIL.finditer(text):
        sep_start = match.start("sep")
        if match.start() < done:
            continue
        name = text[_name_start(text, match.start()) : sep_start]
        if _SECRET_NAME.fullmatch(name) is None:
            continue
        span = _value_span(text, match.end())
        if span is None or text.startswith("[REDACTED:", span[0]):
            continue
        pieces += [text[done : span[0]], _marker("env-secret")]
        done = span[1]
    return "".join(pieces) + text[done:] if pieces else text


class _KnownSecrets:
    """Exact values (the API key in use, secret env values) redacted wherever they appear."""

    MIN_LENGTH = 8
    """Shorter values would redact ordinary words and numbers everywhere."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self.pattern: re.Pattern[str] | None = None

    def add(self, value: str) -> None:
        value = value.strip()
        if len(value) < self.MIN_LENGTH:
            return
        with self._lock:
            if value in self._values:
                return
            self._values.add(value)
            # Longest first so a value containing another is replaced whole.
            ordered = sorted(self._values, key=len, reverse=True)
            self.pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self.pattern = None


_known = _KnownSecrets()


def register_secret(value: str) -> None:
    """Redact this exact value everywhere from now on (as `[REDACTED:known-secret]`).

    Values shorter than 8 characters are ignored: they would match ordinary text.
    """
    _known.add(value)


def clear_registered_secrets() -> None:
    """Forget every value given to `register_secret` (for tests and long-lived processes)."""
    _known.clear()


def redact(text: str) -> str:
    """Return `text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    known = _known.pattern
    if known is not None:
        text = known.sub(_marker("known-secret"), text)
    for kind, pattern in _COMPILED:
        triggers = _TRIGGERS.get(kind)
        if triggers is None or any(t in text for t in triggers):
            text = _substitute(pattern, _marker(kind), text)
    # Last, so a secret-named variable holding a recognisable key keeps the key's kind.
    return _redact_assignments(text)


def _secret_name(key: object) -> bool:
    return isinstance(key, str) and _SECRET_NAME.fullmatch(key) is not None


def _redact_mapping(obj: dict[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in obj.items():
        if _secret_name(key) and isinstance(value, str) and value:
            cleaned = redact(value)
            out[key] = cleaned if cleaned != value else _marker("env-secret")
        else:
            out[key] = redact_obj(value)
    return out


def redact_obj(obj: Any) -> Any:
    """Redact every string inside `obj` (dicts, lists, tuples, pydantic models), recursively.

    A string value under a secret-looking key (`{"HF_TOKEN": "..."}`) is redacted
    whole even when it has no recognisable shape. Other types pass through.
    """
    handler = _HANDLERS.get(type(obj))
    if handler is not None:
        return handler(obj)
    if isinstance(obj, BaseModel):
        return type(obj).model_validate(redact_obj(obj.model_dump()))
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return _redact_mapping(obj)
    if isinstance(obj, list | tuple):
        return type(obj)(redact_obj(item) for item in obj)
    return obj


_HANDLERS: dict[type, Callable[[Any], Any]] = {
    str: redact,
    dict: _redact_mapping,
    list: lambda items: [redact_obj(item) for item in items],
}
