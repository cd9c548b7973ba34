"""Read-only resources: the transcripts in the transcripts folder, and the hosts as configured.

`sleuth://hosts` is the sleuth.toml view (names, ssh aliases, roots, allowed tools), which
holds no secret: keys and passwords live in the SSH agent and ~/.ssh, never in sleuth.toml.
`sleuth://transcripts/<file>.jsonl` is one transcript, read by its name in that one folder
(never through a link): first `sleuth verify`'s verdict on it (text/plain, its headline, from
the same bytes, against the configured allowed signers and ledger), then the file itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import mcp_types as types
from mcp.shared.exceptions import MCPError

from sleuth.config import Settings
from sleuth.transcripts.allowed_signers import AllowedSignersError
from sleuth.transcripts.ledger import LedgerError, ledger_path
from sleuth.transcripts.redact import redact
from sleuth.transcripts.safe_files import read_file
from sleuth.transcripts.verify import Anchors, anchors, verify_bytes

HOSTS_URI = "sleuth://hosts"
TRANSCRIPT_PREFIX = "sleuth://transcripts/"
TRANSCRIPT_MIME = "application/jsonl"
# A transcript's own file name; nothing with a slash or a leading dot can name another file.
_TRANSCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.jsonl")


def listing(transcripts: Path) -> list[types.Resource]:
    found = [
        types.Resource(
            name="hosts",
            uri=HOSTS_URI,
            description="The hosts Sleuth serves: ssh alias, roots, allowed mutating tools.",
            mime_type="application/json",
        )
    ]
    files = sorted(transcripts.glob("*.jsonl")) if transcripts.is_dir() else []
    for path in files:
        if _TRANSCRIPT_NAME.fullmatch(path.name) and path.is_file():
            found.append(
                types.Resource(
                    name=path.name,
                    uri=TRANSCRIPT_PREFIX + path.name,
                    description="A Sleuth transcript: verify's verdict, then the JSON Lines.",
                    mime_type=TRANSCRIPT_MIME,
                    size=path.stat().st_size,
                )
            )
    return found


def read(uri: str, transcripts: Path, settings: Settings) -> types.ReadResourceResult:
    if uri == HOSTS_URI:
        return _contents(uri, "application/json", hosts_json(settings))
    name = uri.removeprefix(TRANSCRIPT_PREFIX)
    if name != uri and _TRANSCRIPT_NAME.fullmatch(name):
        try:
            return _transcript(uri, transcripts / name, settings)
        except OSError:
            pass  # missing, a link, not a file: no such resource
    raise MCPError(
        types.INVALID_PARAMS,
        f"no resource {uri!r}; list them with resources/list ({HOSTS_URI} or "
        f"{TRANSCRIPT_PREFIX}<name>.jsonl from {transcripts})",
    )


def _transcript(uri: str, path: Path, settings: Settings) -> types.ReadResourceResult:
    """The verdict first, then the transcript, both from one read of the file."""
    data = read_file(path)
    try:
        against = anchors(settings.sign.allowed_signers, settings.ledger.path)
    except AllowedSignersError:  # unreadable: the verdict then says the signer is not checked
        against = Anchors(None, ledger_path(settings.ledger.path))
    try:
        verdict = verify_bytes(path, data, against).headline
    except LedgerError as exc:
        verdict = f"NOT VERIFIED: {exc}"
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri=uri, mime_type="text/plain", text=verdict),
            types.TextResourceContents(
                uri=uri, mime_type=TRANSCRIPT_MIME, text=data.decode("utf-8", errors="replace")
            ),
        ]
    )


def hosts_json(settings: Settings) -> str:
    hosts = [
        {
            "name": name,
            "ssh": config.ssh,
            "roots": config.roots,
            "allow": config.allow,
        }
        for name, config in sorted(settings.hosts.items())
    ]
    return redact(json.dumps({"hosts": hosts, "config": settings.source}, indent=2))


def _contents(uri: str, mime: str, text: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
    )
