"""The SSH key a run signs its transcript with: from ssh-agent, or a key file in sleuth.toml.

```python
signer = find_signer("~/.ssh/id_ed25519")   # the agent's copy if it holds it, else the file
signer = find_signer(None)                  # the agent's first key (Ed25519 first), or None
```

`[sign] key` may name a private key file or its `.pub`: the agent's copy of that key is used
when the agent holds it (so a passphrase-protected key needs no prompt), else the private file
itself, which must then be unencrypted. Without `[sign] key`, the agent's keys are the ones
available; with none, the run is not signed.
"""

from __future__ import annotations

import base64
from pathlib import Path

from paramiko import Agent, AgentKey, PKey
from paramiko.ssh_exception import PasswordRequiredException, SSHException

from sleuth.transcripts.sign import KEY_TYPES, Signer, SigningKeyError, fingerprint, key_type

PREFERENCE = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384")
"""Agent keys picked first, in this order; then ecdsa-521 and RSA."""
RSA_SIGNATURE = "rsa-sha2-512"


class KeySigner:
    """Signs with an SSH key: one ssh-agent holds (`agent`: the private key never enters this
    process), or one held here (a private key file, read unencrypted)."""

    def __init__(self, key: PKey, source: str, agent: Agent | None = None) -> None:
        self._key, self.source, self._agent = key, source, agent
        self.public_blob = key.asbytes()

    def sign_data(self, data: bytes) -> bytes:
        algorithm = RSA_SIGNATURE if self._key.get_name() == "ssh-rsa" else None
        try:
            signature = self._key.sign_ssh_data(data, algorithm)
        except (SSHException, OSError, ValueError) as exc:
            raise SigningKeyError(f"{self.source} did not sign: {exc}") from exc
        # paramiko types it as PKey's Message; an agent key answers with the blob's bytes.
        return signature if isinstance(signature, bytes) else signature.asbytes()

    def close(self) -> None:
        if self._agent is not None:
            self._agent.close()


def describe(signer: Signer) -> str:
    """`ssh-ed25519 SHA256:... from ssh-agent`: the start line's words for the key."""
    blob = signer.public_blob
    return f"{key_type(blob)} {fingerprint(blob)} from {signer.source}"


def find_signer(configured: str | None) -> Signer | None:
    """The key to sign with: the configured one (SigningKeyError when it cannot sign), else
    the agent's preferred key, else None."""
    agent = _agent()
    keys = [k for k in agent.get_keys() if k.get_name() in KEY_TYPES] if agent else []
    if configured is None:
        chosen = min(keys, key=_rank) if keys else None
    else:
        wanted = _public_blob(Path(configured).expanduser())
        chosen = next((k for k in keys if k.asbytes() == wanted), None)
    if agent is not None and chosen is not None:
        return KeySigner(chosen, "ssh-agent", agent)
    if agent is not None:
        agent.close()
    return None if configured is None else _file_signer(Path(configured).expanduser(), configured)


def _agent() -> Agent | None:
    """The agent at $SSH_AUTH_SOCK; None when there is none or it does not answer."""
    try:
        return Agent()
    except (SSHException, OSError):
        return None


def _rank(key: AgentKey) -> int:
    name = key.get_name()
    return PREFERENCE.index(name) if name in PREFERENCE else len(PREFERENCE)


def _public_blob(path: Path) -> bytes | None:
    """The public key of `path` (a .pub, or a private key with its .pub beside it)."""
    public = path if path.suffix == ".pub" else path.with_name(path.name + ".pub")
    try:
        fields = public.read_text(encoding="utf-8").split()
    except OSError:
        return None
    try:
        return base64.b64decode(fields[1], validate=True) if len(fields) >= 2 else None
    except ValueError:
        return None


def _file_signer(path: Path, configured: str) -> KeySigner:
    fix = "; or run with --no-sign"
    if path.suffix == ".pub":
        raise SigningKeyError(
            f"[sign] key = {configured!r} is a public key, and ssh-agent does not hold it: "
            f"`ssh-add {path.with_suffix('')}`{fix}"
        )
    try:
        key = PKey.from_path(path)
    # cryptography raises TypeError for an encrypted OpenSSH key loaded without a password.
    except (PasswordRequiredException, TypeError) as exc:
        raise SigningKeyError(
            f"[sign] key = {configured!r} is passphrase-protected and ssh-agent does not hold "
            f"it: `ssh-add {path}`{fix}"
        ) from exc
    except (OSError, SSHException, ValueError) as exc:
        raise SigningKeyError(f"[sign] key = {configured!r} cannot be read: {exc}{fix}") from exc
    if key.get_name() not in KEY_TYPES:
        raise SigningKeyError(
            f"[sign] key = {configured!r} is a {key.get_name()} key; Sleuth signs with "
            f"Ed25519, ECDSA or RSA keys{fix}"
        )
    return KeySigner(key, str(path))
