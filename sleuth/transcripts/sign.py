"""OpenSSH SSHSIG signatures over a transcript's chain head, in the format `ssh-keygen -Y` reads.

```python
message = head_bytes("ab12cd34ef56", 41, "9f2c...")     # what is signed, exactly
armored = sign(signer, message)                        # -----BEGIN SSH SIGNATURE-----...
signature = parse(armored)
check(signature, message)                              # SignatureError unless it verifies
```

The signed message is the head of the hash chain, as bytes (UTF-8, each line ending "\\n"):

    sleuth-transcript-head v1
    <session_id>
    <seq of the last event covered>
    <hash of that event>

Every event before it is bound to that hash by the chain, so one signature covers them all.
The blob and the signed data follow PROTOCOL.sshsig: namespace `sleuth-transcript`, hash
sha512, and for RSA keys the rsa-sha2-512 signature algorithm (never SHA-1 `ssh-rsa`).
"""

from __future__ import annotations

import base64
import hashlib
import struct
from dataclasses import dataclass
from typing import Protocol

NAMESPACE = "sleuth-transcript"
HASH_ALGORITHM = "sha512"
HEAD_VERSION = "sleuth-transcript-head v1"
MAGIC = b"SSHSIG"
SIG_VERSION = 1
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
LINE = 76
"""PROTOCOL.sshsig: the base64 blob SHOULD be broken every 76 characters."""
HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}
RSA_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256")
KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
)
"""Key types Sleuth signs and verifies with (security keys and certificates are not)."""


class SignatureError(Exception):
    """A signature is malformed, for another namespace, or does not verify; the message says
    which."""


class SigningKeyError(Exception):
    """A key cannot sign (unreadable, passphrase-protected, the agent gone); the message says
    how to fix it, or to pass --no-sign."""


class Signer(Protocol):
    """An SSH key that can sign: a key file's, or one held by ssh-agent."""

    @property
    def public_blob(self) -> bytes:
        """The public key in SSH wire encoding (what an allowed_signers line holds)."""
        ...

    @property
    def source(self) -> str:
        """Where the key lives, for people: `ssh-agent` or the key file's path."""
        ...

    def sign_data(self, data: bytes) -> bytes:
        """The SSH signature blob (string algorithm, string signature) over `data`;
        SigningKeyError when the key cannot sign."""
        ...

    def close(self) -> None: ...


def head_bytes(session_id: str, seq: int, event_hash: str) -> bytes:
    """The exact bytes signed for a chain head (see the module docstring)."""
    return f"{HEAD_VERSION}\n{session_id}\n{seq}\n{event_hash}\n".encode()


def fingerprint(public_blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a public key: `SHA256:` and unpadded base64."""
    digest = hashlib.sha256(public_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def key_type(public_blob: bytes) -> str:
    return _Reader(public_blob).string().decode("ascii", "replace")


@dataclass(frozen=True)
class SshSignature:
    """A parsed SSHSIG blob."""

    public_blob: bytes
    namespace: str
    hash_algorithm: str
    signature: bytes
    """The SSH signature blob: string algorithm, string signature bytes."""

    @property
    def key_type(self) -> str:
        return key_type(self.public_blob)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_blob)


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def signed_data(namespace: str, hash_algorithm: str, message: bytes) -> bytes:
    """What the key signs: PROTOCOL.sshsig's "Signed Data" for `message`."""
    digest = HASHES[hash_algorithm](message).digest()
    return (
        MAGIC
        + _string(namespace.encode())
        + _string(b"")
        + _string(hash_algorithm.encode())
        + _string(digest)
    )


def sign(signer: Signer, message: bytes, namespace: str = NAMESPACE) -> str:
    """An armored SSHSIG signature over `message`, as `ssh-keygen -Y sign -n NAMESPACE`
    writes it."""
    signature = signer.sign_data(signed_data(namespace, HASH_ALGORITHM, message))
    blob = (
        MAGIC
        + struct.pack(">I", SIG_VERSION)
        + _string(signer.public_blob)
        + _string(namespace.encode())
        + _string(b"")
        + _string(HASH_ALGORITHM.encode())
        + _string(signature)
    )
    encoded = base64.b64encode(blob).decode()
    lines = [encoded[i : i + LINE] for i in range(0, len(encoded), LINE)]
    return "\n".join([BEGIN, *lines, END]) + "\n"


def parse(armored: str) -> SshSignature:
    """Read an armored SSHSIG signature; SignatureError when it is not one."""
    text = armored.strip()
    if not (text.startswith(BEGIN) and text.endswith(END)):
        raise SignatureError(f"not an SSH signature: it must start with {BEGIN}")
    body = "".join(text[len(BEGIN) : -len(END)].split())
    try:
        blob = base64.b64decode(body, validate=True)
    except ValueError as exc:
        raise SignatureError(f"the SSH signature is not valid base64: {exc}") from exc
    reader = _Reader(blob)
    if reader.take(6) != MAGIC:
        raise SignatureError("the SSH signature blob does not start with SSHSIG")
    version = reader.uint32()
    if version != SIG_VERSION:
        raise SignatureError(f"SSHSIG version {version} is not one this release reads (1)")
    public_blob, namespace = reader.string(), reader.string()
    reader.string()  # reserved: PROTOCOL.sshsig says to ignore it
    hash_algorithm, signature = reader.string(), reader.string()
    if not reader.done():
        raise SignatureError("the SSH signature blob has bytes after its signature")
    return SshSignature(
        public_blob, namespace.decode(errors="replace"), hash_algorithm.decode(), signature
    )


def check(signature: SshSignature, message: bytes, namespace: str = NAMESPACE) -> None:
    """Raise SignatureError unless `signature` is a valid signature of `message` by the key it
    carries, in `namespace`. Whether that key may sign is the allowed signers' question."""
    if signature.namespace != namespace:
        raise SignatureError(
            f"the signature is for namespace {signature.namespace!r}, not {namespace!r}"
        )
    if signature.hash_algorithm not in HASHES:
        raise SignatureError(f"hash algorithm {signature.hash_algorithm!r} is not sha256/512")
    kind = signature.key_type
    if kind not in KEY_TYPES:
        raise SignatureError(f"key type {kind!r} is not one Sleuth verifies")
    algorithm = _Reader(signature.signature).string().decode("ascii", "replace")
    if kind == "ssh-rsa" and algorithm not in RSA_ALGORITHMS:
        raise SignatureError(f"RSA signature algorithm {algorithm!r} is not rsa-sha2-512/256")
    # paramiko is imported here, not at the top: reading a transcript's schema (every --json
    # command's) must not load the SSH stack.
    from paramiko import Message, PKey
    from paramiko.ssh_exception import SSHException

    try:
        key = PKey.from_type_string(kind, signature.public_blob)
        valid = key.verify_ssh_sig(
            signed_data(namespace, signature.hash_algorithm, message),
            Message(signature.signature),
        )
    except (SSHException, ValueError, TypeError) as exc:
        raise SignatureError(f"the signature's {kind} key cannot be read: {exc}") from exc
    if not valid:
        raise SignatureError(
            f"the signature by {kind} {signature.fingerprint} does not verify over this head"
        )


class _Reader:
    """SSH wire-format reading (RFC 4251): uint32s and length-prefixed strings."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SignatureError("the SSH signature blob is cut short")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def string(self) -> bytes:
        return self.take(self.uint32())

    def done(self) -> bool:
        return self.pos == len(self.data)
