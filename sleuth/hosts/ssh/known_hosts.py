"""Host keys: known_hosts entries as OpenSSH reads them, and the verdict on an offered key.

- Entries come from the user's known_hosts and Sleuth's own file: hashed names (`|1|`),
  `[host]:port`, patterns with `*`, `?` and `!`, and the `@revoked` marker (paramiko drops
  marker lines, so they are read here).
- An unknown key is refused unless `accept_new` (then stored in Sleuth's file); a changed or
  revoked key is always refused, with the fingerprints and the command that fixes it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path

import paramiko

from sleuth.errors import ErrorKind, HostError


class HostKeyError(HostError):
    """The server's host key is unknown, changed or revoked (see `kind`)."""


def fingerprint(blob: bytes) -> str:
    """`SHA256:...` exactly as `ssh-keygen -lf` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode()
    return "SHA256:" + digest.rstrip("=")


def key_label(key_type: str) -> str:
    """The key type as `ssh-keygen -l` names it (ED25519, ECDSA, RSA)."""
    if key_type.startswith("ecdsa-"):
        return "ECDSA"
    if key_type in ("ssh-rsa", "rsa-sha2-256", "rsa-sha2-512"):
        return "RSA"
    return key_type.removeprefix("ssh-").upper()


def _blob_type(blob: bytes) -> str:
    size = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + size].decode(errors="replace")


def host_key_name(hostname: str, port: int) -> str:
    """How known_hosts names a host: bare on port 22, else `[host]:port`."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


@dataclass(frozen=True)
class KnownKey:
    file: Path
    line: int
    marker: str | None
    """`@revoked`, `@cert-authority` or None."""
    key_type: str
    blob: bytes

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _pattern_matches(patterns: str, name: str) -> bool:
    if patterns.startswith("|1|"):
        try:
            salt_b64, hash_b64 = patterns[3:].split("|", 1)
            salt, want = base64.b64decode(salt_b64), base64.b64decode(hash_b64)
        except (ValueError, binascii.Error):
            return False
        got = hmac.new(salt, name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(got, want)
    matched = False
    for pattern in patterns.lower().split(","):
        negated = pattern.startswith("!")
        if _glob(pattern.removeprefix("!")).fullmatch(name.lower()):
            if negated:
                return False
            matched = True
    return matched


def _glob(pattern: str) -> re.Pattern[str]:
    """OpenSSH host patterns know only `*` and `?`; brackets are literal (`[host]:port`)."""
    return re.compile("".join({"*": ".*", "?": "."}.get(c, re.escape(c)) for c in pattern))


def read_known_hosts(path: Path, name: str) -> list[KnownKey]:
    """Entries of `path` for host `name`, marker lines included (paramiko drops those)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HostError(
            f"cannot read known_hosts file {path}: {exc.strerror}", ErrorKind.CONFIG
        ) from exc
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if len(fields) < 3 or not _pattern_matches(fields[0], name):
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except binascii.Error:
            continue
        found.append(KnownKey(path, number, marker, fields[1], blob))
    return found


@dataclass
class HostKeyCheck:
    """The verdict on a server's key against every known_hosts file."""

    name: str
    offered: paramiko.PKey
    files: list[Path]
    accept_new: bool
    store: Path

    def run(self) -> None:
        blob = self.offered.asbytes()
        entries = [entry for path in self.files for entry in read_known_hosts(path, self.name)]
        revoked = [e for e in entries if e.marker == "@revoked" and e.blob == blob]
        if revoked:
            raise HostKeyError(
                f"host key of {self.name} ({self._offered_text()}) is marked @revoked in "
                f"{revoked[0].where()}; refusing to connect. The host must get a new key; "
                f"then remove the old entry and accept the new one with --accept-new-host-key",
                ErrorKind.HOST_KEY_REVOKED,
            )
        plain = [e for e in entries if e.marker is None]
        if any(e.blob == blob for e in plain):
            return
        if plain:
            raise HostKeyError(self._changed_text(plain), ErrorKind.HOST_KEY_CHANGED)
        if not self.accept_new:
            raise HostKeyError(self._unknown_text(), ErrorKind.HOST_KEY_UNKNOWN)
        self._store()

    def _offered_text(self) -> str:
        return f"{key_label(self.offered.get_name())} key {fingerprint(self.offered.asbytes())}"

    def _unknown_text(self) -> str:
        files = ", ".join(str(p) for p in self.files)
        return (
            f"host {self.name} is not in known_hosts ({files}); it offered "
            f"{self._offered_text()}. Compare that fingerprint with the host's own "
            f"(`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` there). If it matches, rerun with "
            f"--accept-new-host-key to store it in {self.store}"
        )

    def _changed_text(self, known: list[KnownKey]) -> str:
        expected = "; ".join(
            f"{key_label(_blob_type(e.blob))} key {fingerprint(e.blob)} ({e.where()})"
            for e in known
        )
        first = known[0]
        return (
            f"HOST KEY CHANGED for {self.name}: expected {expected}, but the host offered "
            f"{self._offered_text()}. Someone may be intercepting the connection, or the "
            f"host was reinstalled. Refusing to connect. If the new key is right, delete line "
            f"{first.line} of {first.file} (`ssh-keygen -R '{self.name}' -f {first.file}`) and "
            f"connect again with --accept-new-host-key"
        )

    def _store(self) -> None:
        self.store.parent.mkdir(parents=True, exist_ok=True)
        line = f"{self.name} {self.offered.get_name()} {self.offered.get_base64()}\n"
        with self.store.open("a", encoding="utf-8") as fh:
            fh.write(line)
        self.store.chmod(0o600)


def prefer_known_key_types(transport: paramiko.Transport, known: list[KnownKey]) -> None:
    """Ask for known host key types first, as OpenSSH does, so a host with several keys is
    not mistaken for a changed one; and for the fastest cipher."""
    types = [e.key_type for e in known if e.marker is None]
    if "ssh-rsa" in types:
        types += ["rsa-sha2-512", "rsa-sha2-256"]
    options = transport.get_security_options()
    # AES-GCM needs no separate MAC pass; it moves bulk output about twice as fast here.
    ciphers = list(options.ciphers)
    gcm = [c for c in ciphers if c.endswith("-gcm@openssh.com")]
    options.ciphers = gcm + [c for c in ciphers if c not in gcm]
    supported = list(options.key_types)
    first = [t for t in supported if t in types]
    options.key_types = first + [t for t in supported if t not in first]
