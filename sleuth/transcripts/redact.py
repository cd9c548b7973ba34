"""Secret redaction, applied before anything is written to a transcript, printed, or shown
to a model: `redact(text)` for text, `redact_data(value)` for structured data.

    >>> redact("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01234567")
    'export HF_TOKEN=[REDACTED:huggingface-token]'
    >>> redact_data({"pass\\\\u0077ord": "hunter2-again", "hf_abcdefghijklmnopqrstuvwxyz0123": 1})
    {'pass\\\\u0077ord': '[REDACTED:by-key password]', '[REDACTED:huggingface-token]': 1}

Every replacement names the kind of secret that was there. Shapes and names in text are
`secret_text`'s, the key rules `secret_keys`'; this module adds the exact values known to
be secret, walks structured data (keys too) and cuts text without showing a secret's first
part (`clean_cut`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from sleuth.transcripts.secret_keys import SOFT_LABELS, plain_key, secret_key_label
from sleuth.transcripts.secret_text import (
    BARE_TOKEN,
    SECRET_NAME,
    by_key,
    looks_random,
    marker,
    redact_shapes,
)


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
        text = known.sub(marker("known-secret"), text)
    return redact_shapes(text)


_CUT_WORD = re.compile(r"[^\s\"'`,;{}\[\]()<>|]*")


def clean_cut(kept: str) -> str:
    """`kept`, the part of a text before a cut that the text goes on past, without the word
    the cut went through: a secret cut short has lost the shape redaction knows it by
    (`hf_` and 30 characters, a URL's `@host`), so none of it is shown.

    >>> clean_cut("token hf_AbCdEfGh")
    'token '
    """
    word = _CUT_WORD.match(kept[::-1])
    return kept[: len(kept) - word.end()] if word else kept


ECHO_MIN_LENGTH = 6
"""A value under a secret key this long is also hidden where it appears without its key."""


def _key_label(key: object) -> str | None:
    """The by-key label of a mapping key; env-style names (`OPENAI_KEY`, `GITHUB_PAT`) too."""
    if not isinstance(key, str):
        return None
    label = secret_key_label(key)
    return label or ("secret" if SECRET_NAME.fullmatch(plain_key(key)) else None)


def _shown_key(key: Any, taken: dict[Any, Any]) -> Any:
    """A key as it may be shown: a secret used as a key is redacted like any string (two
    such keys stay two keys)."""
    if not isinstance(key, str):
        return key
    shown = _redact_string(key)
    if shown == key:
        return key
    n, unique = 1, shown
    while unique in taken:
        n += 1
        unique = f"{shown} #{n}"
    return unique


def _under_key(value: Any, label: str, found: dict[str, str]) -> Any:
    """Every scalar below a secret key is the secret (or part of it); only its shape stays.
    The hidden strings are added to `found` (value -> label)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[_shown_key(key, out)] = _under_key(item, label, found)
        return out
    if isinstance(value, list | tuple):
        return type(value)(_under_key(item, label, found) for item in value)
    if value is None or isinstance(value, bool) or value == "":
        return value
    if label in SOFT_LABELS and isinstance(value, int | float):
        return value  # `max_session: 8`, `#token: 6`: a count is not a credential
    if isinstance(value, str) and len(value.strip()) >= ECHO_MIN_LENGTH:
        found[value.strip()] = label
    return by_key(label)


def _flag_label(item: Any, value: Any) -> str | None:
    """The label of `--api-key` in an argument list when the item after it is its value."""
    if not (isinstance(item, str) and item.startswith("--") and isinstance(value, str)):
        return None
    label = secret_key_label(item[2:])
    if label is None or value.startswith("-") or (label in SOFT_LABELS and value.isdigit()):
        return None
    return label


def _data(obj: Any, found: dict[str, str]) -> Any:
    handler = _HANDLERS.get(type(obj))
    if handler is not None:
        return handler(obj, found)
    if isinstance(obj, BaseModel):
        return _data(obj.model_dump(mode="json"), found)
    if isinstance(obj, str):
        return _redact_string(obj)
    if isinstance(obj, dict):
        return _mapping(obj, found)
    if isinstance(obj, list | tuple):
        return type(obj)(_sequence(list(obj), found))
    return obj


def _named_label(obj: dict[Any, Any]) -> str | None:
    """The label of a mapping that names its own value: `{"name": "--api-key", "value": ...}`
    (a parsed flag), `{"name": "HF_TOKEN", "value": ...}` (a container's env entry)."""
    name, value = obj.get("name"), obj.get("value")
    if not isinstance(name, str) or "value" not in obj:
        return None
    return _flag_label(f"--{name.lstrip('-')}", value) if isinstance(value, str) else None


def _mapping(obj: dict[Any, Any], found: dict[str, str]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    named = _named_label(obj)
    for key, value in obj.items():
        label = named if key == "value" and named else _key_label(key)
        out[_shown_key(key, out)] = (
            _under_key(value, label, found) if label else _data(value, found)
        )
    return out


def _sequence(items: list[Any], found: dict[str, str]) -> list[Any]:
    """Each item redacted; in an argument list, the value after `--api-key` by key."""
    out = []
    for i, item in enumerate(items):
        label = _flag_label(items[i - 1], item) if i else None
        out.append(_under_key(item, label, found) if label else _data(item, found))
    return out


def _echoed(obj: Any, pattern: re.Pattern[str], found: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return pattern.sub(lambda m: by_key(found[m.group()]), obj)
    if isinstance(obj, dict):
        return {_echoed(k, pattern, found): _echoed(v, pattern, found) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_echoed(item, pattern, found) for item in obj)
    return obj


def _echo_pattern(found: dict[str, str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True)))


def redact_data(value: Any) -> Any:
    """A redacted copy of structured data: tool data, MCP structured content, `--json`
    output, transcript payloads.

    Every string is passed through `redact` (a whole random-looking string is hidden too);
    every value under a key that marks a secret (`{"HF_TOKEN": ...}`, `{"auth": {"user":
    ...}}`) is hidden whole, however the key is cased, escaped (`pass\\\\u0077ord`) or
    spelled in look-alike letters, and also wherever else it appears in `value`; a key
    that is itself a secret is redacted like a value. Numbers under `token`/`session`
    keys stay (counts). A pydantic model comes back as a model of its own type.
    """
    if isinstance(value, BaseModel):
        return type(value).model_validate(redact_data(value.model_dump(mode="json")))
    found: dict[str, str] = {}
    out = _data(value, found)
    return _echoed(out, _echo_pattern(found), found) if found else out


def _keyed(obj: Any, found: dict[str, str]) -> Any:
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            label = _key_label(key)
            out[key] = _under_key(value, label, found) if label else _keyed(value, found)
        return out
    if isinstance(obj, list):
        return [_keyed(item, found) for item in obj]
    return obj


def redact_keyed(doc: Any) -> Any:
    """Hide every value under a key path that marks a secret, in parsed JSON-like data.

    The key may sit anywhere above the value (`{"auth": {"user": "x"}}` hides "x"), so
    run this on the whole document before picking a part of it, and a hidden value is
    also replaced wherever else it appears in `doc`. Pattern redaction is `redact_data`'s.

    >>> redact_keyed({"db": {"password": "hunter2hunter2", "dsn": "u:hunter2hunter2@db"}})
    {'db': {'password': '[REDACTED:by-key password]', 'dsn': 'u:[REDACTED:by-key password]@db'}}
    """
    found: dict[str, str] = {}
    out = _keyed(doc, found)
    return _echoed(out, _echo_pattern(found), found) if found else out


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An environment as it may be shown (launch env, approval prompts): values under a
    secret name hidden by key, the rest redacted by pattern. The hidden values are also
    registered (`register_secret`), so a server log that echoes one is redacted too.

    >>> redact_env({"HF_TOKEN": "plain-value-123", "CUDA_VISIBLE_DEVICES": "0,1"})
    {'HF_TOKEN': '[REDACTED:by-key token]', 'CUDA_VISIBLE_DEVICES': '0,1'}
    """
    for name, value in env.items():
        if _key_label(name) is not None:
            register_secret(value)
    shown: dict[str, str] = redact_data(env)
    return shown


SHORT = 256
"""Strings this short recur in data (keys, names, enum values, a benchmark's thousands of
records): their redaction is remembered, with the known secrets it was made under."""


def _redact_string(value: str) -> str:
    if len(value) <= SHORT:
        return _redact_short(value, _known.pattern)
    return _redact_whole(value)


@functools.lru_cache(maxsize=1 << 14)
def _redact_short(value: str, known: re.Pattern[str] | None) -> str:
    # `known` is part of the cache key: a secret registered since is redacted here too.
    return _redact_whole(value)


def _redact_whole(value: str) -> str:
    """A string in data is a JSON string position: a whole random-looking token is hidden."""
    cleaned = redact(value)
    if cleaned == value and BARE_TOKEN.fullmatch(value) and looks_random(value):
        return marker("high-entropy")
    return cleaned


_HANDLERS: dict[type, Callable[[Any, dict[str, str]], Any]] = {
    str: lambda value, found: _redact_string(value),
    dict: _mapping,
    list: _sequence,
}
