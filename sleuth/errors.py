"""The errors tools and hosts raise, each with a kind that code can act on.

```python
raise HostError(f"no such file or directory on host {name!r}: {path}", ErrorKind.NOT_FOUND)
...
except HostError as exc:
    if exc.kind is ErrorKind.COMMAND_NOT_FOUND: ...
```

The message is written for the person or model reading it (the cause and, where there is
one, the fix); the kind is for code. Code branches on the kind, never on the message.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorKind(StrEnum):
    """What went wrong, in words a program can compare."""

    INVALID_INPUT = "invalid_input"
    """The call itself is wrong: an unknown tool, a missing or malformed input."""
    UNKNOWN_HOST = "unknown_host"
    POLICY = "policy"
    """The sandbox refused: a path outside the roots, a tool the host does not allow."""
    NOT_APPROVED = "not_approved"
    NOT_FOUND = "not_found"
    """A path on the host does not exist."""
    PERMISSION = "permission"
    """The host refused access to a path."""
    COMMAND_NOT_FOUND = "command_not_found"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_REVOKED = "host_key_revoked"
    UNREACHABLE = "unreachable"
    """No SSH session: the name does not resolve, the port refuses, the handshake fails."""
    AUTH = "auth"
    DROPPED = "dropped"
    """The connection went away while a call ran."""
    TIMEOUT = "timeout"
    """The host stopped answering, or an operation ran past its time."""
    CONFIG = "config"
    """Local configuration is unreadable: an SSH target, a known_hosts file."""
    HOST = "host"
    """Any other failure of a host."""
    FAILED = "failed"
    """A tool's own failure, explained in its message."""
    INTERNAL = "internal"
    """An unexpected exception: a bug in Sleuth, reported with its traceback."""


class KindedError(Exception):
    """An error with a message for people and a kind for code."""

    default_kind: ClassVar[ErrorKind] = ErrorKind.FAILED

    def __init__(self, message: str, kind: ErrorKind | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind or self.default_kind


class HostError(KindedError):
    """A host could not do what was asked (connection, missing file, refused key)."""

    default_kind = ErrorKind.HOST


class ToolError(KindedError):
    """A failure the model can act on: the message says what went wrong and what to do."""

    default_kind = ErrorKind.FAILED
