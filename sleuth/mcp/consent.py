"""The questions this server asked, as `requestState` tokens only it can mint.

```python
tokens = ConsentTokens()                                   # a secret drawn when the server starts
state = tokens.issue("session-1", "stop_server", {"host": "gpu1", "server_id": "srv-1"})
tokens.redeem(state, "session-1", "stop_server", {...})    # True once; False after, or elsewhere
```

On a 2026-07-28 connection the server cannot ask inside a call: it answers `input_required`
and the client calls again with the user's answer and the `requestState` it was given. That
state is HMAC-SHA256, under a per-server secret from `secrets.token_bytes`, of the session,
the tool, the exact canonical arguments and a nonce the server remembers; a nonce is good
once, and for `TTL_S` seconds. A client cannot compute one, nor reuse one from another
session, another call or another input. The secret is never written anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

VERSION = "s1"
TTL_S = 600.0
MAX_OUTSTANDING = 1024
"""Questions awaiting an answer at once; the oldest is forgotten beyond this."""


class ConsentTokens:
    """Mints and redeems the `requestState` of consent questions; thread-safe."""

    def __init__(self, ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._secret = secrets.token_bytes(32)
        self._ttl_s, self._clock = ttl_s, clock
        self._issued: dict[str, float] = {}
        """nonce -> when it expires."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ConsentTokens({len(self._issued)} outstanding)"

    def issue(self, session: str, tool: str, arguments: dict[str, Any]) -> str:
        nonce = secrets.token_urlsafe(18)
        now = self._clock()
        with self._lock:
            for old in [n for n, expires in self._issued.items() if expires <= now]:
                del self._issued[old]
            while len(self._issued) >= MAX_OUTSTANDING:
                del self._issued[next(iter(self._issued))]
            self._issued[nonce] = now + self._ttl_s
        return f"{VERSION}.{nonce}.{self._mac(session, tool, arguments, nonce)}"

    def redeem(self, token: str, session: str, tool: str, arguments: dict[str, Any]) -> bool:
        """Whether `token` is one this server issued for exactly this call in this session, not
        used before and not expired; a good token is used up."""
        version, _, rest = token.partition(".")
        nonce, _, mac = rest.partition(".")
        if version != VERSION or not nonce or not mac:
            return False
        expected = self._mac(session, tool, arguments, nonce)
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            return False
        with self._lock:
            expires = self._issued.pop(nonce, None)
        return expires is not None and self._clock() < expires

    def _mac(self, session: str, tool: str, arguments: dict[str, Any], nonce: str) -> str:
        body = json.dumps(
            [VERSION, session, tool, arguments, nonce],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
        )
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()
