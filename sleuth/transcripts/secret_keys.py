"""Which keys mark a secret: the by-key rules, shared as data with the host-side scanner.

    >>> secret_key_label("client-key-data"), secret_key_label("pass\\\\u0077ord")
    ('private_key', 'password')

A key is first made plain (`plain_key`): JSON, Python and YAML escapes (`\\u0077`,
`\\x77`), percent escapes (`%77`) and Unicode look-alikes (fullwidth `ｐａｓｓ`, styled
letters) are decoded and invisible format characters dropped, so however a file writes
`password` it is read as `password`. The host-side scanner (hosts/program/secret_scan.py)
does the same with its own copy of these few lines; a test holds the two to the same
answers.
"""

from __future__ import annotations

import functools
import re
import unicodedata

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
SQUASHED_RULE = (
    r"(?P<password>password|passwd|passphrase)$|(?P<secret>secrets?)$"
    r"|(?P<api_key>apikey)$|(?P<access_key>accesskey)$|(?P<private_key>privatekey)$"
    r"|(?P<credential>credentials?)$|(?P<token>(?:auth|access|refresh|api)token)$"
)
"""The same words where case split them oddly (`PassWord`, `DBPASSword`, `xApiKEY`): the
key's letters and digits, lower-cased, run together, must END in one of them, so that
`passwordless` and `secretary` stay ordinary."""
KEY_STEMS: tuple[str, ...] = ("pass", "pwd", "psk", "secret", "key", "cred", "auth", "bearer")
KEY_STEMS += ("cookie", "token", "session")
"""Every rule needs one of these in the lower-cased key: a cheap test before the rules."""
SOFT_LABELS = frozenset({"token", "session"})
"""Labels whose numbers stay visible: a count is not a credential."""
KEY_ESCAPES = r"\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}"
"""Escapes a key may be written with; decoded before the rules look at it."""

_KEY_WORDS = re.compile(KEY_WORDS)
_KEY_RULES = [(label, re.compile(rule)) for label, rule in KEY_RULES]
_SQUASHED = re.compile(SQUASHED_RULE)
_ESCAPE = re.compile(KEY_ESCAPES)
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def _unescape(match: re.Match[str]) -> str:
    code = int(match.group()[2:] if match.group()[0] == "\\" else match.group()[1:], 16)
    return chr(code) if code < 0x110000 else match.group()


def plain_key(key: str) -> str:
    """`key` as a reader sees it: escapes decoded, look-alike letters folded, invisible
    characters dropped. Plain ASCII keys come back unchanged at once."""
    if "\\" in key or "%" in key:
        key = _ESCAPE.sub(_unescape, key)
    if not key.isascii():
        key = "".join(
            c for c in unicodedata.normalize("NFKC", key) if unicodedata.category(c) != "Cf"
        )
    return key


@functools.lru_cache(maxsize=4096)
def secret_key_label(key: str) -> str | None:
    """The secret word a key names (`"DB_Password"` -> "password"), or None."""
    key = plain_key(key)
    lowered = key.lower()
    if not any(stem in lowered for stem in KEY_STEMS):
        return None
    words = "_" + "_".join(w.lower() for w in _KEY_WORDS.findall(key)) + "_"
    for label, rule in _KEY_RULES:
        if rule.search(words):
            return label
    squashed = _SQUASHED.search(_NOT_ALNUM.sub("", lowered))
    return squashed.lastgroup if squashed else None
