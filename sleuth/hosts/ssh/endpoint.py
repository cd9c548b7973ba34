"""Where an SSH target lives, resolved the way `ssh` resolves it.

```python
end = resolve("gpu1", load_ssh_config(Path("~/.ssh/config").expanduser()))
end.hostname, end.port, end.user, end.jumps
```

`~/.ssh/config` supplies HostName, User, Port, IdentityFile, IdentitiesOnly and ProxyJump;
a target may also be written `user@host:port`.
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from sleuth.errors import ErrorKind, HostError

_TARGET = re.compile(r"^(?:(?P<user>[^@]+)@)?(?P<host>\[[^\]]+\]|[^:@]+)(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class Endpoint:
    """One hop: where to connect and as whom, resolved from ssh config."""

    alias: str
    hostname: str
    port: int
    user: str
    identity_files: list[Path]
    identities_only: bool
    jumps: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.hostname}:{self.port}"


def load_ssh_config(path: Path) -> paramiko.SSHConfig:
    """The user's ssh config, or an empty one when there is none."""
    if path.is_file():
        return paramiko.SSHConfig.from_path(str(path))
    return paramiko.SSHConfig()


def resolve(target: str, config: paramiko.SSHConfig) -> Endpoint:
    """Resolve `alias` or `user@host:port` the way `ssh` does."""
    match = _TARGET.match(target.strip())
    if not match:
        raise HostError(
            f"cannot parse SSH target {target!r}; use an alias or user@host:port",
            ErrorKind.CONFIG,
        )
    host = match["host"].strip("[]")
    found = config.lookup(host)
    jumps = found.get("proxyjump", "none")
    return Endpoint(
        alias=host,
        hostname=found.get("hostname", host),
        port=int(match["port"] or found.get("port", 22)),
        user=match["user"] or found.get("user") or getpass.getuser(),
        identity_files=[Path(p).expanduser() for p in found.get("identityfile", [])],
        identities_only=found.get("identitiesonly", "no").lower() == "yes",
        jumps=[] if jumps.lower() == "none" else [j.strip() for j in jumps.split(",")],
    )
