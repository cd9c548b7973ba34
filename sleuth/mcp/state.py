"""What every MCP session of one `sleuth mcp` process shares: hosts, rules, folder, secret.

```python
state = ServeState(ctx, Path("transcripts"), settings)
session = state.session(key, ClientInfo(name="claude-code"))   # opened once per client session
state.end_all()                                               # each transcript closed
```

The server, the approval of mutating calls and the transports all read it; it reads none of
them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.config import Settings
from sleuth.mcp.consent import ConsentTokens
from sleuth.mcp.session import ClientInfo, McpSession
from sleuth.tools.context import ToolContext
from sleuth.transcripts.seal import Seal


@dataclass
class ServeState:
    """What every MCP session of this process shares: the hosts, the rules, the folder, and
    the secret its consent questions are keyed with."""

    ctx: ToolContext
    transcripts: Path
    settings: Settings
    consent: ConsentTokens = field(default_factory=ConsentTokens)
    seal: Callable[[], Seal | None] = lambda: None
    """A new seal for each session's transcript (its signer and the ledger), or None."""
    sessions: dict[str, McpSession] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def session(self, key: str, client: ClientInfo) -> McpSession:
        with self._lock:
            found = self.sessions.get(key)
            if found is None:
                found = McpSession.open(self.ctx, self.transcripts, client, seal=self.seal())
                self.sessions[key] = found
            return found

    def end(self, key: str) -> None:
        with self._lock:
            session = self.sessions.pop(key, None)
        if session is not None:
            session.end()

    def end_all(self) -> None:
        for key in list(self.sessions):
            self.end(key)
