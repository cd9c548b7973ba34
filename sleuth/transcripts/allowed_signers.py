"""OpenSSH's allowed_signers file (ssh-keygen(1), ALLOWED SIGNERS): who may sign, with which key.

```python
signers = read_allowed_signers(Path("allowed_signers"))
principals = signers.principals_for(signature.public_blob, "sleuth-transcript")
```

Each line: principals (a comma-separated pattern list), optional options (`namespaces="..."`,
`valid-after=`, `valid-before=`, `cert-authority`), key type, base64 key. Certificate
authorities are read but never match: Sleuth signs with plain keys. Validity times are checked
against now, as `ssh-keygen -Y verify` does without `-Overify-time`.
"""

from __future__ import annotations

import base64
import fnmatch
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sleuth.transcripts.sign import KEY_TYPES

_TIME = re.compile(r"(\d{8})(\d{4}(\d{2})?)?(Z?)")


class AllowedSignersError(Exception):
    """The file cannot be read, or a line of it cannot be parsed; the message names the line."""


@dataclass(frozen=True)
class AllowedSigner:
    principals: str
    """As written: a comma-separated pattern list (`alice@example.com,*@ops.example.com`)."""
    key_blob: bytes
    line: int
    namespaces: str | None = None
    valid_after: datetime | None = None
    valid_before: datetime | None = None
    cert_authority: bool = False

    def accepts(self, key_blob: bytes, namespace: str, now: datetime) -> bool:
        if self.cert_authority or key_blob != self.key_blob:
            return False
        if self.namespaces is not None and not matches_pattern_list(namespace, self.namespaces):
            return False
        if self.valid_after is not None and now < self.valid_after:
            return False
        return not (self.valid_before is not None and now > self.valid_before)


@dataclass(frozen=True)
class AllowedSigners:
    path: Path
    signers: list[AllowedSigner] = field(default_factory=list)

    def principals_for(
        self, key_blob: bytes, namespace: str, now: datetime | None = None
    ) -> list[str]:
        """The principals (patterns, as written) of every line that lets this key sign in this
        namespace."""
        now = now or datetime.now(UTC)
        accepting = [s for s in self.signers if s.accepts(key_blob, namespace, now)]
        return [p for s in accepting for p in s.principals.split(",") if p]


def read_allowed_signers(path: Path) -> AllowedSigners:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AllowedSignersError(f"cannot read allowed signers file {path}: {exc}") from exc
    signers = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            signers.append(_parse_line(line, number))
        except ValueError as exc:
            raise AllowedSignersError(f"{path}:{number}: {exc}") from exc
    return AllowedSigners(Path(path), signers)


def _parse_line(line: str, number: int) -> AllowedSigner:
    fields = _split(line)
    if len(fields) < 3:
        raise ValueError("expected: principals [options] keytype base64-key")
    principals, rest = fields[0].strip('"'), fields[1:]
    options: dict[str, str] = {}
    if rest[0] not in KEY_TYPES and not rest[0].startswith(("sk-", "ssh-", "ecdsa-")):
        options = _options(rest[0])
        rest = rest[1:]
    if len(rest) < 2:
        raise ValueError("no key after the principals and options")
    try:
        blob = base64.b64decode(rest[1], validate=True)
    except ValueError as exc:
        raise ValueError(f"the key is not valid base64: {exc}") from exc
    return AllowedSigner(
        principals=principals,
        key_blob=blob,
        line=number,
        namespaces=options.get("namespaces"),
        valid_after=_time(options["valid-after"]) if "valid-after" in options else None,
        valid_before=_time(options["valid-before"]) if "valid-before" in options else None,
        cert_authority="cert-authority" in options,
    )


def _split(line: str) -> list[str]:
    """Space-separated fields; spaces inside double quotes do not split."""
    fields, current, quoted = [], "", False
    for char in line:
        if char == '"':
            quoted = not quoted
        if char.isspace() and not quoted:
            if current:
                fields.append(current)
            current = ""
        else:
            current += char
    if quoted:
        raise ValueError("an unterminated double quote")
    return [*fields, current] if current else fields


def _options(text: str) -> dict[str, str]:
    """`cert-authority,namespaces="a,b"` -> {"cert-authority": "", "namespaces": "a,b"}."""
    options: dict[str, str] = {}
    for part in re.findall(r'(?:[^,"]|"[^"]*")+', text):
        name, _, value = part.partition("=")
        options[name.lower()] = value.strip('"')
    return options


def _time(text: str) -> datetime:
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"timestamp {text!r} is not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]")
    digits = match.group(1) + (match.group(2) or "0000")
    digits += "" if match.group(3) else "00"
    when = datetime.strptime(digits, "%Y%m%d%H%M%S")
    # Without Z, OpenSSH reads the time in the local zone.
    return when.replace(tzinfo=UTC) if match.group(4) else when.astimezone()


def matches_pattern_list(value: str, patterns: str) -> bool:
    """ssh_config(5) PATTERNS: `*` and `?` wildcards; a `!pattern` that matches refuses."""
    found = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if fnmatch.fnmatchcase(value, pattern.lstrip("!")):
            if negated:
                return False
            found = True
    return found
