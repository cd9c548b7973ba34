"""What every MCP session of one `sleuth mcp` process shares: the hosts, the rules, the folder.

```python
state = ServeState(ctx, Path("transcripts"), settings, fallback=approver_for("refuse"))
session = state.session(key, ClientInfo(name="claude-code"))   # opened once per client session
state.end_all()                                               # each transcript closed
```

The server, the approval of mutating calls and the transports all read it; it reads none of
them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from sleuth.config import Settings
from sleuth.mcp.session import ClientInfo, McpSession
from sleuth.tools.approval import Approver
from sleuth.tools.context import ToolContext


@dataclass
class ServeState:
    """What every MCP session of this process shares: the hosts, the rules, the folder."""

    ctx: ToolContext
    transcripts: Path
    settings: Settings
    fallback: Approver | None = None
    """Decides a mutating call when the client cannot be asked; None keeps the context's."""
    sessions: dict[str, McpSession] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def session(self, key: str, client: ClientInfo) -> McpSession:
        with self._lock:
            found = self.sessions.get(key)
            if found is None:
                found = McpSession.open(self.ctx, self.transcripts, client)
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
