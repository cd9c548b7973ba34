"""Signing and the ledger for the commands that write an investigation's transcript.

```python
seal = seal_for(settings, no_sign=False, quiet=as_json)   # says which key signs, once
...
say_warnings(inv.writer.warnings)                         # what could not be signed
```
"""

from __future__ import annotations

import os
from pathlib import Path

from sleuth.cli.common import EXIT_USAGE, fail, say
from sleuth.config import Settings
from sleuth.transcripts.ledger import ledger_path
from sleuth.transcripts.seal import Seal, Signing
from sleuth.transcripts.sign import SigningKeyError

NO_KEY = (
    "not signing the transcript: no SSH key (load one into ssh-agent, or set [sign] key in "
    "sleuth.toml); `sleuth verify` will call it integrity only"
)

NO_SIGN = "not signing the transcript: --no-sign was given"


def seal_for(settings: Settings, no_sign: bool, quiet: bool) -> Seal:
    """The run's seal: its signing key (exit 2 when a configured key cannot sign) and the
    ledger. Unless `quiet`, says on stderr which key signs, or that none does."""
    signer = None
    line = NO_KEY
    if not no_sign and (settings.sign.key or os.environ.get("SSH_AUTH_SOCK")):
        # paramiko, only where there may be a key: `sleuth tool` on this machine stays light.
        from sleuth.transcripts.signing_keys import describe, find_signer

        try:
            signer = find_signer(settings.sign.key)
        except SigningKeyError as exc:
            fail(str(exc), EXIT_USAGE)
        if signer is not None:
            line = f"signing the transcript with {describe(signer)}"
    if not quiet and not no_sign:
        say(line)
    unsigned = None if signer is not None else NO_SIGN if no_sign else NO_KEY
    return Seal(signer, ledger_path(settings.ledger.path), unsigned=unsigned)


def say_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        say(f"warning: {warning}")


def signing_of(seal: Seal, settings: Settings) -> Signing:
    """Who signed the run, for `--json`; principals from `[sign] allowed_signers`."""
    allowed = settings.sign.allowed_signers
    return seal.signing(Path(allowed).expanduser() if allowed else None)
