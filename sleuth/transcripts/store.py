"""The append-only transcript store: one JSON Lines file per session, hash-chained, fsynced.

    writer = TranscriptWriter.create(Path("transcripts"), session_id)
    stored = writer.append(SessionStarted(session_id=..., question=..., hosts=[], brain="replay"))
    loaded = load(writer.path)

Each line is one event. `append` redacts the payload, fills the envelope
(`seq`, `ts`, `prev`, `hash`), writes the line and fsyncs it before returning,
so a crash loses at most the event in flight and the file keeps only whole
lines: a prefix that still verifies. A writer given a `Seal` signs the head at
each `checkpoint()` and at session_ended (see `seal.py`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sleuth.transcripts.events import Event, Repaired, SessionEnded, SessionStarted, parse_event
from sleuth.transcripts.redact import redact_data
from sleuth.transcripts.safe_files import NO_LINK, read_file, replace_whole, write_new

if TYPE_CHECKING:  # seal imports this module: the writer is handed one, never imports it
    from sleuth.transcripts.seal import Seal

ENVELOPE = ("seq", "ts", "type", "prev", "hash")
"""Fields the store owns. They are never redacted: `hash` and `prev` are sha256 hex."""

SESSION_OWNED = ("session_id",)
UNREDACTED = ("signature", "repaired")
"""Events the store writes itself, from hashes and signatures: nothing in them to redact, and
an armored signature must stay byte for byte."""
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


AppendListener = Callable[[Path, Event], None]
"""Hears each event as stored (redacted, sealed) with its transcript's path; must not raise."""
_listeners: list[AppendListener] = []


def listen(listener: AppendListener) -> Callable[[], None]:
    """Every writer in this process tells `listener` of each event it stores, in the order of
    the transcript, until the returned function is called: live telemetry tees the events of
    any command this way, after the redaction and sealing that the transcript itself gets."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


class TranscriptError(Exception):
    """A transcript could not be written or read; the message names the file and the cause."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def event_hash(raw: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of an event's dict without its `hash` field."""
    body = {key: value for key, value in raw.items() if key != "hash"}
    # surrogatepass: tool output may carry lone surrogates; hash them deterministically.
    return hashlib.sha256(canonical_json(body).encode("utf-8", "surrogatepass")).hexdigest()


def utc_timestamp() -> str:
    """Now, as UTC ISO-8601 with milliseconds: 2026-11-29T09:30:12.345Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_line(raw: dict[str, Any]) -> bytes:
    """One event as a JSON line, UTF-8 (ASCII-escaped only if the text cannot be UTF-8)."""
    text = json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(raw, separators=(",", ":")) + "\n").encode("ascii")


@dataclass(frozen=True)
class Head:
    """A chain head: the last event's seq and hash, in the session `session_id`."""

    session_id: str
    seq: int
    hash: str


@dataclass(frozen=True)
class RawLines:
    """A transcript split into its complete lines and, if the end was cut off, the torn tail."""

    lines: list[bytes]
    """Complete lines without their newline; line numbers are index + 1."""
    torn_tail: bytes | None


def split_lines(data: bytes) -> RawLines:
    """Split file bytes; only a final piece with no newline is torn (a crash mid-write).

    A line that ends with its newline was written whole: if it is not JSON, that is
    corruption for the reader to report, never a torn tail to skip.
    """
    pieces = data.split(b"\n")
    tail = pieces.pop()
    return RawLines(pieces, tail or None)


def _describe_torn(tail: bytes | None) -> str | None:
    if tail is None:
        return None
    preview = tail[:60].decode("utf-8", "replace")
    return (
        f"torn: the run died mid-event: the last line is incomplete ({len(tail)} bytes, "
        f"starting {preview!r}); it was ignored"
    )


@dataclass(frozen=True)
class LoadedTranscript:
    path: Path
    events: list[Event]
    torn_tail: str | None
    """A description of the cut-off last line, when there was one."""


def _read_reason(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return (
            f"cannot read transcript {path}: it is a symbolic link; Sleuth reads transcripts "
            "only as the files themselves (name the file it points to)"
        )
    return f"cannot read transcript {path}: {_reason(exc)}"


def read_transcript(path: Path) -> bytes:
    """`read_file` for a transcript; TranscriptError names the file and the cause."""
    try:
        return read_file(path)
    except OSError as exc:
        raise TranscriptError(_read_reason(path, exc)) from exc


def load(path: Path) -> LoadedTranscript:
    """Read a transcript. A torn last line is skipped and described; any other bad line raises.

    Raises TranscriptError naming the line number of the first unreadable event.
    """
    path = Path(path)
    return load_data(path, read_transcript(path))


def load_data(path: Path, data: bytes) -> LoadedTranscript:
    """`load` of bytes already read from `path` (named in errors), so one read can serve more."""
    raw = split_lines(data)
    events = [_parse_line(path, number, line) for number, line in enumerate(raw.lines, start=1)]
    return LoadedTranscript(path, events, _describe_torn(raw.torn_tail))


def _parse_line(path: Path, number: int, line: bytes) -> Event:
    try:
        return parse_event(json.loads(line))
    except ValueError as exc:
        kind = "is not a valid event" if isinstance(exc, ValidationError) else "is not JSON"
        raise TranscriptError(
            f"{path}:{number}: line {kind}: {_first_line(exc)}; run `sleuth verify {path}`"
        ) from exc


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class TranscriptWriter:
    """Appends events to one transcript file; safe to share between threads."""

    def __init__(
        self,
        path: Path,
        next_seq: int,
        prev_hash: str,
        *,
        session_id: str = "",
        seal: Seal | None = None,
        last_type: str = "",
    ) -> None:
        self.path = path
        self._seq = next_seq
        self._prev = prev_hash
        self._session_id = session_id
        self._seal = seal
        self._last_type = last_type
        self._lock = threading.Lock()
        try:
            # Never through a link: a planted one fails (ELOOP) instead of being written to.
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NO_LINK, 0o600)
        except OSError as exc:
            raise TranscriptError(_read_reason(path, exc).replace("read", "open", 1)) from exc
        status = os.fstat(self._fd)
        if not stat.S_ISREG(status.st_mode):
            os.close(self._fd)
            raise TranscriptError(f"cannot open transcript {path}: it is not a regular file")
        self._size = status.st_size

    @classmethod
    def create(cls, directory: Path, session_id: str, seal: Seal | None = None) -> TranscriptWriter:
        """Start `<directory>/<UTC time>-<session_id>.jsonl`, creating the folder."""
        if not _SESSION_ID.fullmatch(session_id):
            raise ValueError(
                f"session id {session_id!r} must be letters, digits, '_', '.' or '-' (max 128)"
            )
        directory = Path(directory)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = directory / f"{stamp}-{session_id}.jsonl"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NO_LINK, 0o600))
        except FileExistsError as exc:
            raise TranscriptError(f"transcript {path} exists; use a new session id") from exc
        except OSError as exc:
            raise TranscriptError(f"cannot create transcript {path}: {_reason(exc)}") from exc
        return cls(path, 0, "", session_id=session_id, seal=seal)

    @classmethod
    def reopen(
        cls,
        path: Path,
        loaded: LoadedTranscript | None = None,
        seal: Seal | None = None,
        opening: Event | None = None,
    ) -> TranscriptWriter:
        """Continue an existing transcript's chain (for resume); `loaded` is the file as the
        caller already read it, so it is not read again; `opening` (the resumed run's
        `session_started`) is the first event appended, so everything the resumed run adds
        follows its start.

        A torn last line is cut off first: the valid prefix is written to a
        temporary file and renamed over the original, whose full bytes are
        kept beside it as `<name>.torn`, and the repair is recorded after `opening`.
        """
        path = Path(path)
        loaded = load(path) if loaded is None else loaded
        repair = _drop_torn_tail(path) if loaded.torn_tail is not None else None
        if not loaded.events:
            writer = cls(path, 0, "", seal=seal)
        else:
            first, last = loaded.events[0], loaded.events[-1]
            session_id = first.session_id if isinstance(first, SessionStarted) else ""
            writer = cls(
                path,
                last.seq + 1,
                last.hash,
                session_id=session_id,
                seal=seal,
                last_type=last.type,
            )
        for event in (opening, repair):
            if event is not None:
                writer.append(event)
        return writer

    @property
    def warnings(self) -> list[str]:
        """What the seal could not sign or record, for the command to say after the run."""
        return self._seal.warnings if self._seal is not None else []

    def append(self, event: Event) -> Event:
        """Redact, seal and durably write `event`; return it as stored.

        Raises TranscriptError if the write fails; the file is cut back to its
        last whole line, and the writer can go on appending.
        """
        with self._lock:
            return self._append_locked(event)

    def checkpoint(self) -> None:
        """A turn boundary: sign the head so far, when this writer signs and the head moved.

        The signature event is not fsynced on its own: the next event's fsync (there is always
        one: the next turn, or session_ended) makes it durable with it. A power cut before then
        loses that one signature (a process that dies loses nothing: the page cache survives
        it), and spares every turn an fsync, the bulk of a signature's cost.
        """
        with self._lock:
            if self._seal is None or self._seq == 0 or self._last_type == "signature":
                return
            head = Head(self._session_id, self._seq - 1, self._prev)
            event = self._seal.at_turn(self.path, head)
            if event is not None:
                self._append_locked(event, durable=False)

    def _append_locked(self, event: Event, durable: bool = True) -> Event:
        dumped = event.model_dump(mode="json")
        payload = {key: value for key, value in dumped.items() if key not in ENVELOPE}
        # The session id is the store's own (checked against _SESSION_ID, and in the file
        # name): the rule for keys named like `session_id` is for cookies, not for it.
        own = {key: payload.pop(key) for key in SESSION_OWNED if key in payload}
        raw: dict[str, Any] = {"seq": self._seq, "ts": utc_timestamp(), "type": event.type}
        raw.update(payload if event.type in UNREDACTED else redact_data(payload))
        raw.update(own)
        raw["prev"] = self._prev
        raw["hash"] = event_hash(raw)
        self._write(encode_line(raw), durable)
        self._seq += 1
        self._prev = raw["hash"]
        self._last_type = event.type
        if isinstance(event, SessionStarted) and not self._session_id:
            self._session_id = event.session_id
        if isinstance(event, SessionEnded) and self._seal is not None:
            head = Head(self._session_id, raw["seq"], raw["hash"])
            self._seal.at_end(self.path, head, event.status)
        stored = parse_event(raw)
        for listener in _listeners:  # under the lock, so each hears the transcript's order
            listener(self.path, stored)
        return stored

    def _write(self, line: bytes, durable: bool = True) -> None:
        good = self._size
        try:
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if durable:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut_back(good)
            raise TranscriptError(
                f"cannot write to transcript {self.path}: {_reason(exc)}"
                f" (event {self._seq} was not recorded; the file still holds whole events"
                f" up to {self._seq - 1})"
            ) from exc
        self._size = good + len(line)

    def _cut_back(self, good: int) -> None:
        try:
            os.ftruncate(self._fd, good)
            os.fsync(self._fd)
        except OSError:
            # The loader drops a torn last line anyway; nothing more we can do here.
            pass

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if self._seal is not None:
                self._seal.close()

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> Repaired:
    try:
        data = read_file(path)
        torn = split_lines(data).torn_tail or b""
        keep = len(data) - len(torn)
        backup = _keep_beside(path, data)
        replace_whole(path, data[:keep])
    except OSError as exc:
        raise TranscriptError(f"cannot repair torn transcript {path}: {_reason(exc)}") from exc
    return Repaired(
        dropped_bytes=len(torn),
        dropped_sha256=hashlib.sha256(torn).hexdigest(),
        backup=str(backup),
    )


def _keep_beside(path: Path, data: bytes) -> Path:
    """`data` in `<name>.torn` (or `.torn.2`, ... when that name is taken: a second repair, or
    something planted there, is never overwritten)."""
    for n in range(1, 100):
        backup = path.with_name(path.name + (".torn" if n == 1 else f".torn.{n}"))
        try:
            write_new(backup, data)
            return backup
        except FileExistsError:
            continue
    raise OSError(f"{path.name}.torn to .torn.99 all exist; move them away")
