"""Unique secret values for leak tests, and the test that none of them shows anywhere.

```python
value = canary("hf_", 34)                 # hf_ and 34 random letters and digits
password = plain()                        # what only a key or a URL's shape gives away
assert leaked([value], output, data) == []
```

A canary counts as leaked when any 8 characters of it in a row appear in a text, so a
first part shown before a cut counts as much as the whole.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterable
from typing import Any

ALNUM = string.ascii_letters + string.digits
WINDOW = 8


def canary(prefix: str = "", length: int = 24, alphabet: str = ALNUM) -> str:
    """`prefix` and `length` random characters with upper, lower and digits among them."""
    while True:
        body = "".join(secrets.choice(alphabet) for _ in range(length))
        if alphabet != ALNUM or (
            any(c.isupper() for c in body)
            and any(c.islower() for c in body)
            and any(c.isdigit() for c in body)
        ):
            return prefix + body


def plain(length: int = 20) -> str:
    """Lower-case letters and digits: no shape, and too regular for the generic detector of
    random tokens, so only the rule under test can hide it."""
    return canary("", length, string.ascii_lowercase + string.digits)


PUBLIC_PREFIXES = ("sk-ant-api03-", "sk-proj-", "github_pat_", "ghp_", "xoxb-", "hf_", "AKIA")
"""Prefixes every credential of a kind shares: Sleuth's own patterns name them, so they are
no part of what must stay secret."""


def windows(value: str) -> set[str]:
    """Every 8 characters in a row of `value`'s secret part (its public prefix left off)."""
    secret = next((value[len(p) :] for p in PUBLIC_PREFIXES if value.startswith(p)), value)
    return {secret[i : i + WINDOW] for i in range(max(1, len(secret) - WINDOW + 1))}


def leaked(values: Iterable[str], *texts: Any) -> list[str]:
    """The values any 8 characters of which appear in one of `texts` (data is dumped as
    JSON first)."""
    blob = "\n".join(t if isinstance(t, str) else json.dumps(t) for t in texts)
    return [v for v in values if any(w in blob for w in windows(v))]
