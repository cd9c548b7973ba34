"""SSHSIG as OpenSSH writes and reads it: Sleuth's signatures verify with `ssh-keygen -Y verify`,
`ssh-keygen -Y sign`'s verify with Sleuth, and allowed_signers lines mean what they say there."""

from __future__ import annotations

import base64
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sleuth.transcripts.allowed_signers import (
    AllowedSignersError,
    matches_pattern_list,
    read_allowed_signers,
)
from sleuth.transcripts.sign import (
    NAMESPACE,
    SignatureError,
    SigningKeyError,
    check,
    head_bytes,
    parse,
    sign,
)
from sleuth.transcripts.signing_keys import find_signer
from tests.signing_support import Key, allow, make_key, need

MESSAGE = head_bytes("ab12cd34ef56", 41, "9f" * 32)


def keygen_verify(signers: Path, who: str, signature: str, message: bytes) -> int:
    sig = signers.with_name("message.sig")
    sig.write_text(signature)
    return subprocess.run(
        [need("ssh-keygen"), "-Y", "verify", "-f", str(signers), "-I", who, "-n", NAMESPACE,
         "-s", str(sig)],
        input=message, capture_output=True,
    ).returncode  # fmt: skip


@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
def test_sleuths_signature_verifies_with_ssh_keygen_and_back(tmp_path: Path, kind: str) -> None:
    key = make_key(tmp_path, kind)
    signer = find_signer(str(key.private))
    assert signer is not None
    armored = sign(signer, MESSAGE)
    assert armored.startswith("-----BEGIN SSH SIGNATURE-----\n")
    signers = allow(tmp_path, [("alice@example.com", key)])
    assert keygen_verify(signers, "alice@example.com", armored, MESSAGE) == 0
    assert keygen_verify(signers, "alice@example.com", armored, MESSAGE + b" ") != 0
    theirs = subprocess.run(
        [need("ssh-keygen"), "-Y", "sign", "-f", str(key.private), "-n", NAMESPACE],
        input=MESSAGE, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    check(parse(theirs), MESSAGE)
    assert parse(theirs).fingerprint == key.fingerprint()
    with pytest.raises(SignatureError, match="does not verify"):
        check(parse(theirs), MESSAGE.replace(b"41", b"42"))


def test_a_signature_for_another_namespace_or_mangled_is_refused(tmp_path: Path) -> None:
    key = make_key(tmp_path, "ed25519")
    signer = find_signer(str(key.private))
    assert signer is not None
    with pytest.raises(SignatureError, match="namespace 'file'"):
        check(parse(sign(signer, MESSAGE, namespace="file")), MESSAGE)
    armored = sign(signer, MESSAGE)
    with pytest.raises(SignatureError, match="not an SSH signature"):
        parse(armored.replace("BEGIN SSH", "BEGIN PGP"))
    body = "".join(armored.splitlines()[1:-1])
    blob = bytearray(base64.b64decode(body))
    blob[-1] ^= 1  # the last byte of the signature itself
    edited = base64.b64encode(bytes(blob)).decode()
    with pytest.raises(SignatureError, match="does not verify"):
        check(parse(f"-----BEGIN SSH SIGNATURE-----\n{edited}\n-----END SSH SIGNATURE-----"),
              MESSAGE)  # fmt: skip
    with pytest.raises(SignatureError, match="cut short"):
        parse(f"-----BEGIN SSH SIGNATURE-----\n{body[:40]}\n-----END SSH SIGNATURE-----")


def test_a_passphrase_protected_key_not_in_the_agent_says_how_to_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "locked"
    subprocess.run(
        [need("ssh-keygen"), "-q", "-t", "ed25519", "-N", "secret", "-f", str(path)], check=True
    )
    with pytest.raises(SigningKeyError, match=f"ssh-add {path}"):
        find_signer(str(path))
    with pytest.raises(SigningKeyError, match="public key, and ssh-agent does not hold it"):
        find_signer(f"{path}.pub")
    assert find_signer(None) is None, "no agent, no configured key: no signature"


def test_allowed_signers_options_patterns_and_validity(tmp_path: Path) -> None:
    alice, bob = make_key(tmp_path, "ed25519", "a"), make_key(tmp_path, "rsa", "b")
    past = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y%m%d")
    path = tmp_path / "allowed"
    path.write_text(
        "# team signers\n\n"
        f'"alice@example.com,a2@example.com" namespaces="sleuth-*,!file" {alice.public_line()} c\n'
        f"bob@example.com valid-before={past}Z {bob.public_line()}\n"
        f"*@example.com cert-authority {bob.public_line()}\n"
    )
    signers = read_allowed_signers(path)
    blob = base64.b64decode(alice.public_line().split()[1])
    assert signers.principals_for(blob, NAMESPACE) == ["alice@example.com", "a2@example.com"]
    assert signers.principals_for(blob, "file") == []
    bob_blob = base64.b64decode(bob.public_line().split()[1])
    assert signers.principals_for(bob_blob, NAMESPACE) == [], "expired, and a CA is not a key"
    path.write_text(f"alice@example.com {alice.public_line()}\nbroken-line\n")
    with pytest.raises(AllowedSignersError, match=":2:"):
        read_allowed_signers(path)


@pytest.mark.parametrize(
    ("value", "patterns", "matched"),
    [
        ("sleuth-transcript", "sleuth-*", True),
        ("sleuth-transcript", "file,git", False),
        ("sleuth-transcript", "*,!sleuth-transcript", False),
        ("sleuth-transcript", "sleuth-transcrip?", True),
    ],
)
def test_ssh_pattern_lists(value: str, patterns: str, matched: bool) -> None:
    assert matches_pattern_list(value, patterns) is matched


def test_the_signed_head_is_the_documented_bytes() -> None:
    assert head_bytes("s1", 3, "ab") == b"sleuth-transcript-head v1\ns1\n3\nab\n"


def test_key_fixture_fingerprints_match_openssh(tmp_path: Path) -> None:
    key: Key = make_key(tmp_path, "ed25519")
    signer = find_signer(str(key.private))
    assert signer is not None and parse(sign(signer, b"x")).fingerprint == key.fingerprint()
