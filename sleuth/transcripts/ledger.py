"""The local ledger: each session's final chain head, one JSON line per session, hash-chained.

```python
append_entry(ledger_path(None), LedgerEntry(session_id=..., transcript=..., head_seq=41, ...))
check = check_ledger(ledger_path(None), "ab12cd34ef56", hashes)   # match / not in / differs
```

It lives in the user's state directory (`$XDG_STATE_HOME/sleuth/ledger.jsonl`, else
`~/.local/state/sleuth/ledger.jsonl`; `[ledger] path` in sleuth.toml moves it). Writers take
an exclusive flock, so runs that end together append one after the other, and fsync each
line. Every line carries `prev` and `hash` like a transcript's events, so a line edited or
removed breaks the chain; shipping the file to a log store (see the README) puts its lines
beyond the reach of whoever can write this machine's disk.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from sleuth.transcripts.allowed_signers import AllowedSigners
from sleuth.transcripts.sign import NAMESPACE, SignatureError, check, head_bytes, parse
from sleuth.transcripts.store import encode_line, event_hash, split_lines, utc_timestamp

LEDGER_FILE = "ledger.jsonl"
TAIL_CHUNK = 4096


class LedgerError(Exception):
    """The ledger cannot be written or read; the message names the file and the cause."""


class LedgerEntry(BaseModel):
    """One session's end, as its transcript's writer saw it."""

    seq: int = -1
    ts: str = ""
    session_id: str
    transcript: str
    """The transcript's absolute path when it was written."""
    head_seq: int
    head_hash: str
    """The last event's seq and hash: session_ended's."""
    status: str
    signer: str | None = None
    """The signing key's fingerprint, when the end was signed."""
    sshsig: str | None = None
    """The armored signature over the head, as in the transcript's `.sig` file."""
    prev: str = ""
    hash: str = ""


LedgerState = Literal["match", "not_in_ledger", "differs", "duplicate", "forged", "broken"]


class LedgerCheck(BaseModel):
    """`sleuth verify`: the transcript against the ledger's entry for its session."""

    ledger: str
    state: LedgerState
    """match; not_in_ledger; differs (the entry holds another head); duplicate (more than one
    entry: a session ends once, so the others were added); forged (the entry's signature fails,
    or is not by an allowed signer); broken (the ledger's own chain fails)."""
    message: str
    entry_ts: str | None = None
    entries: int = 0
    """How many entries the ledger holds for this session: one for a session that ended."""


def ledger_path(configured: str | None, env: Mapping[str, str] | None = None) -> Path:
    """`[ledger] path`, else $XDG_STATE_HOME/sleuth/ledger.jsonl, else ~/.local/state/..."""
    env = os.environ if env is None else env
    if configured:
        return Path(configured).expanduser()
    state = env.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "sleuth" / LEDGER_FILE


def append_entry(path: Path, entry: LedgerEntry) -> LedgerEntry:
    """Seal `entry` onto the end of the ledger's chain and fsync it; return it as written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise LedgerError(f"cannot open ledger {path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        last = _last_entry(fd)
        raw = entry.model_dump(mode="json") | {
            "seq": 0 if last is None else last["seq"] + 1,
            "ts": utc_timestamp(),
            "prev": "" if last is None else last["hash"],
        }
        raw["hash"] = event_hash(raw)
        os.write(fd, encode_line(raw))
        os.fsync(fd)
        return LedgerEntry.model_validate(raw)
    except OSError as exc:
        raise LedgerError(f"cannot append to ledger {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)  # closing releases the lock


def _last_entry(fd: int) -> dict[str, Any] | None:
    """The last whole line, read backwards from the end; a torn tail (a writer that died
    mid-line) is cut off first, so the next line starts on a line of its own."""
    size = os.fstat(fd).st_size
    tail, start = b"", size
    while start > 0 and tail.count(b"\n") < 2:
        start = max(0, start - TAIL_CHUNK)
        tail = os.pread(fd, size - start, start)
    if tail and not tail.endswith(b"\n"):
        keep = start + tail.rfind(b"\n") + 1
        os.ftruncate(fd, keep)
        tail = tail[: keep - start]
    lines = tail.splitlines()
    if not lines:
        return None
    try:
        last = json.loads(lines[-1])
    except ValueError:
        last = None
    if not (isinstance(last, dict) and isinstance(last.get("seq"), int)):
        raise LedgerError("the ledger's last line is not an entry, so nothing can chain onto it")
    return last


def read_ledger(path: Path) -> tuple[list[LedgerEntry], str | None]:
    """Every entry, and the first break in the ledger's own chain (None when it holds). The
    file may be an excerpt (one machine's lines, in order, from a log store)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read ledger {path}: {exc.strerror or exc}") from exc
    entries: list[LedgerEntry] = []
    prev: str | None = None
    for number, line in enumerate(split_lines(data).lines, start=1):
        try:
            raw = json.loads(line)
            entry = LedgerEntry.model_validate(raw)
        except (ValueError, ValidationError):
            return entries, f"{path}:{number} is not a ledger entry"
        # The first line may continue a chain begun before it: an excerpt from a log store.
        if raw.get("hash") != event_hash(raw) or prev not in (None, entry.prev):
            return entries, f"{path}:{number} breaks the ledger's chain: it was edited or removed"
        entries.append(entry)
        prev = entry.hash
    return entries, None


def check_ledger(
    path: Path, session_id: str, hashes: list[str], allowed: AllowedSigners | None = None
) -> LedgerCheck | None:
    """The transcript (its session id and every event's hash, in order) against the ledger at
    `path`, each entry's signature checked (its signer against `allowed` when given); None
    when there is no ledger there."""
    if not path.is_file():
        return None
    entries, broken = read_ledger(path)
    where = str(path)
    if broken is not None:
        return LedgerCheck(ledger=where, state="broken", message=f"the ledger {broken}")
    mine = [e for e in entries if e.session_id == session_id]
    if not mine:
        return LedgerCheck(
            ledger=where,
            state="not_in_ledger",
            message=f"session {session_id} is not in the ledger {path}",
        )
    count, entry = len(mine), mine[-1]
    if count > 1:
        stamps = ", ".join(e.ts for e in mine)
        return LedgerCheck(
            ledger=where,
            state="duplicate",
            entries=count,
            entry_ts=entry.ts,
            message=f"the ledger holds {count} entries for session {session_id} ({stamps}); a "
            f"session ends once, so all but one were added later: the ledger ({path}) was "
            "appended to by someone else, and the transcript may be rewritten",
        )
    forged = _entry_signature_problem(entry, allowed)
    if forged is not None:
        return LedgerCheck(
            ledger=where,
            state="forged",
            entries=1,
            entry_ts=entry.ts,
            message=f"the ledger entry of {entry.ts} for session {session_id}: {forged} ({path})",
        )
    if entry.head_seq == len(hashes) - 1 and hashes[entry.head_seq] == entry.head_hash:
        return LedgerCheck(
            ledger=where,
            state="match",
            entries=1,
            entry_ts=entry.ts,
            message=f"matches the session's one ledger entry, of {entry.ts} ({path})",
        )
    return LedgerCheck(
        ledger=where,
        state="differs",
        entries=1,
        entry_ts=entry.ts,
        message=f"differs from the ledger entry of {entry.ts}: the ledger recorded "
        f"{entry.head_seq + 1} events ending in hash {entry.head_hash[:16]}…, the file has "
        f"{len(hashes)} ending in {hashes[-1][:16] if hashes else '(none)'}… ({path})",
    )


def _entry_signature_problem(entry: LedgerEntry, allowed: AllowedSigners | None) -> str | None:
    """Why the entry's signature over its head does not hold, or None (also for an unsigned
    entry: an unsigned run records one)."""
    if entry.sshsig is None:
        return None if entry.signer is None else "it names a signer but carries no signature"
    try:
        signature = parse(entry.sshsig)
        check(signature, head_bytes(entry.session_id, entry.head_seq, entry.head_hash))
    except SignatureError as exc:
        return f"its signature does not sign its head: {exc}"
    if entry.signer != signature.fingerprint:
        return f"it names signer {entry.signer!r}, but its signature is by {signature.fingerprint}"
    if allowed is not None and not allowed.principals_for(signature.public_blob, NAMESPACE):
        return (
            f"it is signed by {signature.fingerprint}, a key not in {allowed.path} for "
            f"namespace {NAMESPACE}: an unknown signer"
        )
    return None
