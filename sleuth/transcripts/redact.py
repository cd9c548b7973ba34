"""Secret redaction, applied before anything is written to a transcript or shown to a model.

    >>> redact("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01234567")
    'export HF_TOKEN=[REDACTED:huggingface-token]'

Every replacement names the kind of secret that was there. The patterns are
deliberately anchored on shapes real credentials have (prefixes, lengths,
`NAME=value` context), so ordinary investigation output such as tensor names,
sha256 digests and git commit ids passes through untouched.
"""

from __future__ import annotations

import functools
import math
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

# Key paths that mark a secret. A key is split into lower-case words (`apiKey`, `API-KEY`
# and `api_key` all become `_api_key_`) and each rule is searched in that form. The rules
# travel as data to the host-side scanner (hosts/program/secret_scan.py), so both sides
# decide alike. `token` and `session` are common in model configs and logs (`bos_token`,
# `#token: 6`), so they count only as a key's last word, not after a special-token word,
# and never for a number.
KEY_WORDS = r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+"
KEY_RULES: list[tuple[str, str]] = [
    ("private_key", r"_(?:private|client|signing|ssh|encryption|account)_?key_"),
    ("api_key", r"_api_?key_"),
    ("access_key", r"_access_?key_"),
    ("password", r"_(?:password|passwords|passphrase|pwd|psk)_|_pass_$"),
    ("passwd", r"_passwd_"),
    ("secret", r"_secrets?_"),
    ("credential", r"_(?:credentials?|creds)_"),
    ("auth", r"_(?:auth|authn|authorization|authentication|oauth)_"),
    ("bearer", r"_bearer_"),
    ("cookie", r"_cookies?_"),
    (
        "token",
        r"(?<!_bos)(?<!_eos)(?<!_unk)(?<!_sep)(?<!_pad)(?<!_cls)(?<!_mask)(?<!_image)"
        r"(?<!_video)(?<!_audio)(?<!_vision)(?<!_start)(?<!_end)(?<!_begin)(?<!_special)"
        r"(?<!_boi)(?<!_eoi)(?<!_boa)(?<!_eoa)(?<!_think)(?<!_tool)(?<!_placeholder)"
        r"(?<!_max)(?<!_min)(?<!_num)(?<!_stop)(?<!_default)_token_$",
    ),
    ("session", r"_session_(?:id_)?$|_sessionid_$"),
]
KEY_STEMS: tuple[str, ...] = ("pass", "pwd", "psk", "secret", "key", "cred", "auth", "bearer")
KEY_STEMS += ("cookie", "token", "session")
"""Every rule needs one of these in the lower-cased key: a cheap test before the rules."""
SOFT_LABELS = frozenset({"token", "session"})
"""Labels whose numbers stay visible: a count is not a credential."""
_KEY_WORDS = re.compile(KEY_WORDS)
_KEY_RULES = [(label, re.compile(rule)) for label, rule in KEY_RULES]


@functools.lru_cache(maxsize=4096)
def secret_key_label(key: str) -> str | None:
    """The secret word a key names (`"DB_Password"` -> "password"), or None.

    >>> secret_key_label("client-key-data"), secret_key_label("bos_token")
    ('private_key', None)
    """
    lowered = key.lower()
    if not any(stem in lowered for stem in KEY_STEMS):
        return None
    words = "_" + "_".join(w.lower() for w in _KEY_WORDS.findall(key)) + "_"
    for label, rule in _KEY_RULES:
        if rule.search(words):
            return label
    return None


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
    ("slack-webhook", r"hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    ("google-api-key", r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}"),
    ("stripe-key", r"[sr]k_(?:live|test)_(?<![A-Za-z0-9][sr]k_live_)[0-9A-Za-z]{16,}"),
    ("gitlab-token", r"glpat-(?<![A-Za-z0-9_-]glpat-)[A-Za-z0-9_-]{20,}"),
    ("npm-token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}"),
    ("bearer-token", r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9._~+/-]{16,}=*"),
    ("url-password", r"(?P<keep>://[^\s:/@\"'<>]+:)[^\s@/\"'<>]+(?=@)"),
    ("jwt", r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
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
    r"[yYnNtTdDsShHeErRlLkK](?<=(?i:key|ken|ret|ets|swd|ord|rds|als|pat|uth|ion|kie|ies|rer|ial"
    r"|ase|pwd|ass|psk))(?P<sep>[\"']?[ \t]*[=:][ \t]*)"
)
_AUTH_SCHEMES = frozenset({"basic", "bearer", "token", "digest", "negotiate", "apikey"})
_SCHEME_GAP = re.compile(r"[ \t]+")
_PLAIN_NUMBER = re.compile(r"-?[0-9][0-9_.eE+-]*")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_QUOTED_VALUE = {q: re.compile(rf"(?:[^{q}\n\\]|\\.)+") for q in "\"'"}
_BARE_VALUE = re.compile(r"[^\s\"',;}\]]+")


# Long random-looking tokens with no known prefix, in value positions (`key=TOKEN`,
# `key: TOKEN`, `"TOKEN"`). Hex (git SHAs, sha256 digests), UUIDs, numbers and dotted or
# slashed names (model ids, tensor names) never match: they are what investigations quote.
_ENTROPY_CANDIDATE = re.compile(
    r"(?:[=:][ \t]*[\"']?|[\"'])(?P<tok>[A-Za-z0-9+/_-]{24,}={0,2})(?![A-Za-z0-9+/=_.:-])"
)
_HEX_OR_UUID = re.compile(r"(?:[0-9a-fA-F]+|(?:GPU-|MIG-)?[0-9a-fA-F-]+)")
_WORDISH = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?=[A-Z][a-z]|[^A-Za-z]|$)")
# A digest named by its algorithm (an SSH key fingerprint `SHA256:base64`, an SRI hash
# `sha512-base64`) is public and is what a user compares.
_DIGEST_LABEL = re.compile(r"(?i:sha(?:1|224|256|384|512)|md5)[:-]?\Z")
_DIGEST_NAME = re.compile(r"(?i:sha(?:1|224|256|384|512)|md5)-")
ENTROPY_MIN_BITS = 3.6
"""Shannon bits per character; random base62 of 24+ characters has about 4.2."""


def looks_random(token: str) -> bool:
    """Whether `token` looks like a generated secret rather than a name or a digest."""
    core = token.rstrip("=")
    if _HEX_OR_UUID.fullmatch(core) or core.isdigit():
        return False
    if max(len(run) for run in re.split(r"[-_/+]", core)) < 16:
        return False  # dashed or slashed names: model ids, tensor names, words
    classes = sum(
        (
            any(c.islower() for c in core),
            any(c.isupper() for c in core),
            any(c.isdigit() for c in core),
        )
    )
    if classes < 3 and not ("+" in core or "/" in core):
        return False
    wordish = sum(len(m) for m in _WORDISH.findall(core))
    if wordish > len(core) * 0.5:
        return False  # CamelCase identifiers: Qwen2VLForConditionalGeneration
    counts: dict[str, int] = {}
    for c in core:
        counts[c] = counts.get(c, 0) + 1
    bits = -sum(n / len(core) * math.log2(n / len(core)) for n in counts.values())
    return bits >= ENTROPY_MIN_BITS


def _redact_random(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        tok = match.group("tok")
        named = _DIGEST_LABEL.search(text, 0, match.start("tok")) or _DIGEST_NAME.match(tok)
        if named or not looks_random(tok):
            return match.group(0)
        return match.group(0)[: match.start("tok") - match.start()] + _marker("high-entropy")

    return _ENTROPY_CANDIDATE.sub(swap, text)


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
        named = _SECRET_NAME.fullmatch(name) is not None
        label = None if named else secret_key_label(name)
        if not named and label is None:
            continue
        span = _value_span(text, match.end())
        if span is not None and text[span[0] : span[1]].lower() in _AUTH_SCHEMES:
            # `Authorization: Basic CREDENTIALS`: the credential is the word after the scheme.
            after = _SCHEME_GAP.match(text, span[1])
            span = _value_span(text, after.end()) if after else None
        if span is None or text.startswith("[REDACTED:", span[0]):
            continue
        if label in SOFT_LABELS and _PLAIN_NUMBER.fullmatch(text[span[0] : span[1]]):
            continue  # `#token: 6` in a decode log line is a count
        pieces += [text[done : span[0]], _marker("env-secret") if named else _by_key(label or "")]
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
    # After the shapes, so a secret-named variable holding a recognisable key keeps the
    # key's kind; the generic detector last, for what no name or shape gave away.
    return _redact_random(_redact_assignments(text))


def _by_key(label: str) -> str:
    return _marker(f"by-key {label}")


ECHO_MIN_LENGTH = 6
"""A value under a secret key this long is also hidden where it appears without its key."""


def _key_label(key: object) -> str | None:
    """The by-key label of a mapping key; env-style names (`OPENAI_KEY`, `GITHUB_PAT`) too."""
    if not isinstance(key, str):
        return None
    return secret_key_label(key) or ("secret" if _SECRET_NAME.fullmatch(key) else None)


def _redact_mapping(obj: dict[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in obj.items():
        label = _key_label(key)
        out[key] = _under_key(value, label, {}) if label else redact_obj(value)
    return out


def _under_key(value: Any, label: str, found: dict[str, str]) -> Any:
    """Every scalar below a secret key is the secret (or part of it); only its shape stays.
    The hidden strings are added to `found` (value -> label)."""
    if isinstance(value, dict):
        return {k: _under_key(v, label, found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_under_key(item, label, found) for item in value)
    if value is None or isinstance(value, bool) or value == "":
        return value
    if label in SOFT_LABELS and isinstance(value, int | float):
        return value  # `max_session: 8`, `#token: 6`: a count is not a credential
    if isinstance(value, str) and len(value.strip()) >= ECHO_MIN_LENGTH:
        found[value.strip()] = label
    return _by_key(label)


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


def _echoed(obj: Any, pattern: re.Pattern[str], found: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return pattern.sub(lambda m: _by_key(found[m.group()]), obj)
    if isinstance(obj, dict):
        return {_echoed(k, pattern, found): _echoed(v, pattern, found) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_echoed(item, pattern, found) for item in obj]
    return obj


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
    shown: dict[str, str] = redact_obj(env)
    return shown


def redact_keyed(doc: Any) -> Any:
    """Hide every value under a key path that marks a secret, in parsed JSON-like data.

    The key may sit anywhere above the value (`{"auth": {"user": "x"}}` hides "x"), so
    run this on the whole document before picking a part of it, and a hidden value is
    also replaced wherever else it appears in `doc`. Pattern redaction is separate
    (`redact_obj`).

    >>> redact_keyed({"db": {"password": "hunter2hunter2", "dsn": "u:hunter2hunter2@db"}})
    {'db': {'password': '[REDACTED:by-key password]', 'dsn': 'u:[REDACTED:by-key password]@db'}}
    """
    found: dict[str, str] = {}
    out = _keyed(doc, found)
    if not found:
        return out
    pattern = re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True)))
    return _echoed(out, pattern, found)


def redact_obj(obj: Any) -> Any:
    """Redact every string inside `obj` (dicts, lists, tuples, pydantic models), recursively.

    Every value under a key that marks a secret (`{"HF_TOKEN": "..."}`,
    `{"auth": {"user": "..."}}`) is redacted whole, as `[REDACTED:by-key token]`,
    even when it has no recognisable shape. Other types pass through.
    """
    handler = _HANDLERS.get(type(obj))
    if handler is not None:
        return handler(obj)
    if isinstance(obj, BaseModel):
        return type(obj).model_validate(redact_obj(obj.model_dump()))
    if isinstance(obj, str):
        return _redact_string(obj)
    if isinstance(obj, dict):
        return _redact_mapping(obj)
    if isinstance(obj, list | tuple):
        return type(obj)(redact_obj(item) for item in obj)
    return obj


_BARE_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")


def _redact_string(value: str) -> str:
    """A string in data is a JSON string position: a whole random-looking token is hidden."""
    cleaned = redact(value)
    if cleaned == value and _BARE_TOKEN.fullmatch(value) and looks_random(value):
        return _marker("high-entropy")
    return cleaned


_HANDLERS: dict[type, Callable[[Any], Any]] = {
    str: _redact_string,
    dict: _redact_mapping,
    list: lambda items: [redact_obj(item) for item in items],
}


def redact_data(value: Any) -> Any:
    """Structured data as it may leave the process (tool results, `--json`, MCP
    `structuredContent`): every string redacted as `redact_obj` does, dict keys included."""
    return _redact_keys(redact_obj(value))


def _redact_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {(redact(k) if isinstance(k, str) else k): _redact_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_keys(item) for item in value)
    return value
