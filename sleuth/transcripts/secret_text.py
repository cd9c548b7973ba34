"""Secrets in text, found by their shape or by the name beside them: `redact_shapes(text)`.

The patterns are deliberately anchored on shapes real credentials have (prefixes, lengths,
`NAME=value` context, URL authorities and query parameters, `--flag value`), so ordinary
investigation output such as tensor names, sha256 digests and git commit ids passes
through untouched. `sleuth.transcripts.redact` puts the exact known values first and
calls this.
"""

from __future__ import annotations

import math
import re

from sleuth.transcripts.secret_keys import SOFT_LABELS, plain_key, secret_key_label


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def by_key(label: str) -> str:
    return marker(f"by-key {label}")


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
SECRET_NAME = re.compile(rf"(?:{_UPPER_NAME}|{_LOWER_NAME})")

# The authority of a URL ends at these; a password runs to the last `@` before a host.
_HOST = r"(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?"
_AUTHORITY_END = r"(?=[/?#\s\"'<>,;)\]}]|$)"

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
    # `scheme://user:pw@host`, `redis://:pw@host`, `//user:pw@host`; a password may hold
    # `@`, `:` and, unencoded as it should not be, `/` (base64): the host is what follows
    # the last `@` before the authority ends.
    (
        "url-password",
        rf"(?P<keep>//[^\s:/?#@\"'<>]*:)[^\s?#\"'<>]+?(?=@{_HOST}{_AUTHORITY_END})",
    ),
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
    "url-password": ("//",),
}

# `user:pw@host` with no scheme (`DSN=admin:pw@db.internal:5432/app`, `redis-cli -u
# :pw@cache:6379`): found from its `:`, then checked to be a whole authority.
_BARE_AUTHORITY = re.compile(rf":(?P<pw>[^\s/?#\"'<>,;]+?)@(?P<host>{_HOST}){_AUTHORITY_END}")
_USER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~%+-")
_AUTHORITY_START = frozenset(" \t\n\r=\"'([{,;<>|")
_NOT_USERS = frozenset({"mailto", "xmpp", "sip", "tel", "news"})

# Query parameters that carry credentials (`?sig=`, `&X-Amz-Signature=`, `?token=`).
_QUERY = re.compile(r"(?P<keep>[?&](?P<name>[A-Za-z0-9_.%-]+)=)(?P<value>[^&#\s\"'<>]+)")
_QUERY_NAMES = frozenset(
    {"sig", "signature", "key", "apikey", "token", "auth", "pass", "pwd", "secret", "sas"}
    | {"x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature"}
    | {"x-goog-credential", "access_token", "id_token", "refresh_token", "client_secret"}
)

# `--api-key VALUE`, `--hf-token "VALUE"` on a command line. A short lower-case word after
# the flag is prose ("--api-key is required"), not a value.
_PROSE_WORD = re.compile(r"[a-z]{1,10}[.,;:]?")
_FLAG = re.compile(
    r"(?P<keep>--(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)[ \t]+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'$-][^\s\"']*)"
)

# Secret-named assignments are found from the name's last word backwards,
# since a pattern starting at every identifier is ten times slower. A name written
# with escapes (`pass\u0077ord`) or in look-alike letters ends in an escape or a
# non-ASCII letter; those tails are tried only in text that holds them.
_SEP = r"(?P<sep>[\"']?[ \t]*[=:][ \t]*)"
_NAME_TAIL = re.compile(
    r"[yYnNtTdDsShHeErRlLkK](?<=(?i:key|ken|ret|ets|swd|ord|rds|als|pat|uth|ion|kie|ies|rer|ial"
    r"|ase|pwd|ass|psk))" + _SEP
)
_ESCAPED_TAIL = re.compile(
    r"(?:[0-9a-fA-F](?<=\\u[0-9a-fA-F]{4})|[0-9a-fA-F](?<=\\x[0-9a-fA-F]{2})"
    r"|[0-9a-fA-F](?<=\\U[0-9a-fA-F]{8})|[0-9a-fA-F](?<=%[0-9a-fA-F]{2})|[^\x00-\x7f])" + _SEP
)
_AUTH_SCHEMES = frozenset({"basic", "bearer", "token", "digest", "negotiate", "apikey"})
_SCHEME_GAP = re.compile(r"[ \t]+")
_PLAIN_NUMBER = re.compile(r"-?[0-9][0-9_.eE+-]*")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-\\%")
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
BARE_TOKEN = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")


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
        return match.group(0)[: match.start("tok") - match.start()] + marker("high-entropy")

    return _ENTROPY_CANDIDATE.sub(swap, text)


def _substitute(pattern: re.Pattern[str], kind: str, text: str) -> str:
    if "keep" in pattern.groupindex:
        return pattern.sub(lambda m: m.group("keep") + marker(kind), text)
    return pattern.sub(marker(kind), text)


def _redact_authority(text: str) -> str:
    """`user:pw@host` without a scheme, where the host is clearly one (a dot, a port,
    `localhost` or an address) and the user starts a word."""

    def swap(match: re.Match[str]) -> str:
        start = match.start()
        while start > 0 and text[start - 1] in _USER_CHARS:
            start -= 1
        user, host = text[start : match.start()], match.group("host")
        if match.group("pw").startswith("[REDACTED:"):
            return match.group()
        if (start > 0 and text[start - 1] not in _AUTHORITY_START) or user.lower() in _NOT_USERS:
            return match.group()
        if not ("." in host or ":" in host or host.startswith("[") or host == "localhost"):
            return match.group()
        return f":{marker('url-password')}@{host}"

    return _BARE_AUTHORITY.sub(swap, text)


def _redact_query(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        name = plain_key(match.group("name"))
        secret = (
            name.lower() in _QUERY_NAMES or secret_key_label(name) or SECRET_NAME.fullmatch(name)
        )
        if not secret or match.group("value").startswith("[REDACTED:"):
            return match.group()
        return match.group("keep") + marker("url-secret")

    return _QUERY.sub(swap, text)


def _redact_flags(text: str) -> str:
    def swap(match: re.Match[str]) -> str:
        label = secret_key_label(match.group("name"))
        value = match.group("value")
        if label is None or value.startswith("[REDACTED:") or _PROSE_WORD.fullmatch(value):
            return match.group()
        if label in SOFT_LABELS and _PLAIN_NUMBER.fullmatch(value):
            return match.group()
        return match.group("keep") + by_key(label)

    return _FLAG.sub(swap, text)


_STRAY = re.compile(
    r".*[\\%](?!u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|(?<=%)[0-9a-fA-F]{2})", re.S
)
"""Up to the last backslash or percent sign that starts no escape (`\\n` in a log line)."""


def _name_at(text: str, end: int) -> str:
    """The name that ends at `end`: letters, digits, `_.-`, escapes, look-alike letters."""
    start = end
    while start > 0:
        c = text[start - 1]
        if not (c in _NAME_CHARS or (not c.isascii() and (c.isalnum() or not c.isprintable()))):
            break
        start -= 1
    name = text[start:end]
    return _STRAY.sub("", name, count=1) if "\\" in name or "%" in name else name


def _value_span(text: str, pos: int) -> tuple[int, int] | None:
    quote = text[pos : pos + 1]
    if quote in _QUOTED_VALUE:
        match = _QUOTED_VALUE[quote].match(text, pos + 1)
    else:
        match = _BARE_VALUE.match(text, pos)
    return match.span() if match else None


def _assignment_label(name: str) -> tuple[bool, str | None] | None:
    """(named like an env secret, by-key label), or None for an ordinary name."""
    plain = plain_key(name)
    named = SECRET_NAME.fullmatch(plain) is not None
    label = None if named else secret_key_label(plain)
    return (named, label) if named or label else None


def _tails(text: str) -> list[re.Match[str]]:
    found = list(_NAME_TAIL.finditer(text))
    if "\\" in text or "%" in text or not text.isascii():
        found = sorted([*found, *_ESCAPED_TAIL.finditer(text)], key=lambda m: m.start())
    return found


def _redact_assignments(text: str) -> str:
    pieces: list[str] = []
    done = 0
    for match in _tails(text):
        sep_start = match.start("sep")
        if match.start() < done:
            continue
        judged = _assignment_label(_name_at(text, sep_start))
        if judged is None:
            continue
        named, label = judged
        span = _value_span(text, match.end())
        if span is not None and text[span[0] : span[1]].lower() in _AUTH_SCHEMES:
            # `Authorization: Basic CREDENTIALS`: the credential is the word after the scheme.
            after = _SCHEME_GAP.match(text, span[1])
            span = _value_span(text, after.end()) if after else None
        if span is None or text.startswith("[REDACTED:", span[0]):
            continue
        if label in SOFT_LABELS and _PLAIN_NUMBER.fullmatch(text[span[0] : span[1]]):
            continue  # `#token: 6` in a decode log line is a count
        pieces += [text[done : span[0]], marker("env-secret") if named else by_key(label or "")]
        done = span[1]
    return "".join(pieces) + text[done:] if pieces else text


def redact_shapes(text: str) -> str:
    """`text` with every secret recognised by shape or name replaced by `[REDACTED:<kind>]`."""
    for kind, pattern in _COMPILED:
        triggers = _TRIGGERS.get(kind)
        if triggers is None or any(t in text for t in triggers):
            text = _substitute(pattern, kind, text)
    if "@" in text:
        text = _redact_authority(text)
    if "=" in text and ("?" in text or "&" in text):
        text = _redact_query(text)
    if "--" in text:
        text = _redact_flags(text)
    # After the shapes, so a secret-named variable holding a recognisable key keeps the
    # key's kind; the generic detector last, for what no name or shape gave away.
    return _redact_random(_redact_assignments(text))
