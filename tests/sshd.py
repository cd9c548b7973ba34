"""A throwaway OpenSSH server on 127.0.0.1 for tests and benchmarks.

```python
with SSHServer.create(tmp_dir) as server:
    SSHHost("remote", server.alias, known_hosts=..., ssh_config_path=server.ssh_config_path,
            user_known_hosts=server.known_hosts_path)
```

It has its own ed25519 host key and a user key, and a temporary HOME whose
`.ssh/config` names it `sleuth-test`, so `HOME=server.home ssh sleuth-test` works.
It runs as the current user, who is also the login user. `create(dir, sftp=False)` starts
one without the SFTP subsystem, as hardened servers run.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

SSHD = Path("/usr/sbin/sshd")
INSTALL_HINT = "install it with `apt-get install -y openssh-server`"
ALIAS = "sleuth-test"


def missing_reason() -> str | None:
    """Why no server can be started here, or None when one can."""
    if not SSHD.exists():
        return f"{SSHD} is missing; {INSTALL_HINT}"
    if shutil.which("ssh-keygen") is None:
        return f"ssh-keygen is missing; {INSTALL_HINT}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def keygen(path: Path) -> str:
    """Make an ed25519 key pair at `path`; return its `SHA256:` fingerprint per ssh-keygen."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
    )
    listed = subprocess.run(
        ["ssh-keygen", "-lf", str(path) + ".pub"], check=True, capture_output=True, text=True
    ).stdout
    return listed.split()[1]


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`: sshd gives each connection its own session, so a signal to
    the listener's group would leave established connections running."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class SSHServer:
    dir: Path
    port: int
    host: str = "127.0.0.1"
    user: str = field(default_factory=getpass.getuser)
    alias: str = ALIAS
    host_key_fingerprint: str = ""
    extra_config: list[str] = field(default_factory=list)
    sftp: bool = True
    process: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def ssh_config_path(self) -> Path:
        return self.home / ".ssh" / "config"

    @property
    def known_hosts_path(self) -> Path:
        return self.home / ".ssh" / "known_hosts"

    @property
    def client_key_path(self) -> Path:
        return self.home / ".ssh" / "id_ed25519"

    @property
    def host_key_path(self) -> Path:
        return self.dir / "ssh_host_ed25519_key"

    @property
    def log_path(self) -> Path:
        return self.dir / "sshd.log"

    @classmethod
    def create(cls, dir: Path, *, clean_shell: bool = True, sftp: bool = True) -> SSHServer:
        """Write keys and config under `dir` and start the server.

        `clean_shell` points the remote HOME at the temporary home, so the login shell reads
        an empty ~/.bashrc instead of the real user's (root's here runs `pyenv init`, ~100 ms
        per command), and puts this Python's directory first on PATH so `python3` is the same
        interpreter on both sides. The benchmark turns it off to measure that cost.
        """
        extra = []
        if clean_shell:
            python_dir = os.path.dirname(os.path.realpath(sys.executable))
            extra.append(
                f"SetEnv HOME={dir / 'home'} PATH={python_dir}:/usr/local/bin:/usr/bin:/bin"
            )
        server = cls(dir=dir, port=free_port(), extra_config=extra, sftp=sftp)
        server._write_files()
        server.start()
        return server

    def _write_files(self) -> None:
        (self.home / ".ssh").mkdir(parents=True, mode=0o700)
        self.host_key_fingerprint = keygen(self.host_key_path)
        keygen(self.client_key_path)
        shutil.copy(str(self.client_key_path) + ".pub", self.dir / "authorized_keys")
        host_pub = Path(str(self.host_key_path) + ".pub").read_text().split()
        self.known_hosts_path.write_text(f"[{self.host}]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.ssh_config_path.write_text(
            f"Host {self.alias}\n"
            f"    HostName {self.host}\n"
            f"    Port {self.port}\n"
            f"    User {self.user}\n"
            f"    IdentityFile {self.client_key_path}\n"
            f"    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts_path}\n"
            f"    StrictHostKeyChecking yes\n"
            f"    BatchMode yes\n"
        )
        sftp = "/usr/lib/openssh/sftp-server"
        lines = [
            f"Port {self.port}",
            f"ListenAddress {self.host}",
            f"HostKey {self.host_key_path}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "StrictModes no",
            "UsePAM no",
            "AllowTcpForwarding yes",
            "MaxSessions 32",
            "MaxStartups 100:30:200",
            "LogLevel ERROR",
            *self.extra_config,
        ]
        if self.sftp:
            lines.append(f"Subsystem sftp {sftp if os.path.exists(sftp) else 'internal-sftp'}")
        (self.dir / "sshd_config").write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        # sshd's privilege separation directory; Debian creates it only from its service unit.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {self.log_path.read_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as sock:
                    if sock.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"sshd did not answer on port {self.port}: {self.log_path.read_text()}")

    def stop(self) -> None:
        """Stop the listener and drop every established connection."""
        if self.process is None:
            return
        victims = [self.process.pid, *_descendants(self.process.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> SSHServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
