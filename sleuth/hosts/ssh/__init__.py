"""Hosts reached over SSH, resolved and checked the way `ssh` does it.

```python
host = SSHHost("gpu1", "gpu1", known_hosts=Path("~/.config/sleuth/known_hosts").expanduser())
host.run(["sed", "-n", "1,20p", "--", "/models/x/config.json"], timeout=30, max_bytes=64_000)
```

- `endpoint`: the target as `~/.ssh/config` resolves it (HostName, User, Port,
  IdentityFile, IdentitiesOnly, ProxyJump).
- `known_hosts`: host keys checked against the user's known_hosts and Sleuth's own file.
- `login`: one transport opened (directly or through jump hosts), its host key checked,
  and logged in with the agent's, the configured or the default keys.
- `connection`: one reused transport, re-made after a drop, and its channels.
- `channel_exec`: one command on an exec channel, with a remote `timeout` so a timed-out
  command's process group dies.
- `sftp` and `fallback`: stat, realpath and byte ranges over pooled SFTP clients, or by
  exec with POSIX tools where the server has no SFTP subsystem.
- `program`: Sleuth's host program, resident on one channel per connection (or run once per
  request over exec), its requests, and its replacement when it dies or hangs.
- `host`: `SSHHost`, the Host protocol over all of these.
"""

from sleuth.hosts.ssh.host import NO_SFTP, SSHHost
from sleuth.hosts.ssh.known_hosts import HostKeyError, fingerprint, key_label, read_known_hosts

__all__ = ["NO_SFTP", "HostKeyError", "SSHHost", "fingerprint", "key_label", "read_known_hosts"]
