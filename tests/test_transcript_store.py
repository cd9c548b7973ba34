"""The store: hash-chained, fsynced lines that survive crashes, full disks and threads."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.transcripts.events import ErrorEvent, Repaired, SessionStarted, ToolExecuted
from sleuth.transcripts.store import TranscriptError, TranscriptWriter, event_hash, load
from sleuth.transcripts.verify import verify
from tests.transcript_samples import sample_events, write_sample


def test_round_trip_keeps_every_event_and_chains_them(tmp_path: Path) -> None:
    path = write_sample(tmp_path / "transcripts")
    assert path.parent == tmp_path / "transcripts"
    assert path.name.endswith("-s1.jsonl") and path.name[8] == "T"
    loaded = load(path)
    originals = sample_events()
    assert [e.type for e in loaded.events] == [e.type for e in originals]
    assert [e.seq for e in loaded.events] == list(range(len(originals)))
    assert loaded.events[0].prev == ""
    for before, after in zip(loaded.events, loaded.events[1:], strict=False):
        assert after.prev == before.hash
    first = json.loads(path.read_bytes().splitlines()[0])
    assert first["hash"] == event_hash(first)
    assert first["ts"].endswith("Z") and len(first["ts"]) == len("2026-11-29T09:30:12.345Z")
    assert loaded.events[2].model_dump(exclude={"seq", "ts", "prev", "hash"}) == originals[
        2
    ].model_dump(exclude={"seq", "ts", "prev", "hash"})
    report = verify(path)
    assert report.ok and report.events == len(originals) and report.ended


def test_append_returns_the_stored_event_with_its_envelope(tmp_path: Path) -> None:
    with TranscriptWriter.create(tmp_path, "abc") as writer:
        first = writer.append(sample_events()[0])
        second = writer.append(ErrorEvent(where="tool", message="boom"))
    assert (first.seq, second.seq) == (0, 1)
    assert second.prev == first.hash and len(first.hash) == 64
    assert load(writer.path).events == [first, second]


def test_create_refuses_unsafe_session_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="session id"):
        TranscriptWriter.create(tmp_path, "../escape")


def test_torn_last_line_is_skipped_and_described(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 8, "ts": "2026-')
    loaded = load(path)
    assert len(loaded.events) == len(sample_events())
    assert loaded.torn_tail is not None and "incomplete" in loaded.torn_tail


def test_a_bad_line_before_the_last_raises_with_its_number(tmp_path: Path) -> None:
    path = write_sample(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"not json\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(TranscriptError, match=r":3: line is not JSON"):
        load(path)


def test_reopen_drops_a_torn_tail_records_the_repair_and_continues_the_chain(
    tmp_path: Path,
) -> None:
    path = write_sample(tmp_path, sample_events()[:3])
    torn = b'{"seq":3,"type":"tool_exec'
    with open(path, "ab") as handle:
        handle.write(torn)
    with TranscriptWriter.reopen(path) as writer:
        resumed = writer.append(ErrorEvent(where="store", message="resumed"))
    assert resumed.seq == 4
    backup = path.with_name(path.name + ".torn")
    assert backup.read_bytes().endswith(torn)
    repair = load(path).events[3]
    assert isinstance(repair, Repaired) and repair.dropped_bytes == len(torn)
    assert repair.dropped_sha256 == hashlib.sha256(torn).hexdigest()
    assert repair.backup == str(backup)
    report = verify(path)
    assert report.ok and report.torn_tail is None and report.events == 5


def test_concurrent_appends_from_threads_stay_one_chain(tmp_path: Path) -> None:
    writer = TranscriptWriter.create(tmp_path, "threads")
    writer.append(sample_events()[0])

    def work(n: int) -> None:
        for i in range(25):
            writer.append(
                ToolExecuted(call_id=f"t{n}-{i}", tool="x", input={}, ok=True, output="y" * 500)
            )

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    report = verify(writer.path)
    assert report.ok, report.problems
    assert report.events == 101


_CRASHING_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sleuth.transcripts.events import SessionStarted, ToolExecuted
    from sleuth.transcripts.store import TranscriptWriter

    writer = TranscriptWriter.create(Path(sys.argv[1]), "crash")
    writer.append(SessionStarted(session_id="crash", question="q", hosts=[], brain="replay"))
    print(writer.path, flush=True)
    i = 0
    while True:
        writer.append(ToolExecuted(call_id=f"c{i}", tool="t", input={}, ok=True,
                                   output="x" * (i % 7 * 40000)))
        i += 1
    """
)


def test_sigkill_mid_run_leaves_a_prefix_that_verifies(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    deadline = time.monotonic() + 20
    while path.stat().st_size < 400_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    report = verify(path)
    assert report.ok, report.problems
    assert report.events >= 5
    assert not report.ended


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a 64 KiB tmpfs to fill ({result.stderr.strip()}); needs root")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def test_a_full_disk_raises_a_clear_error_and_keeps_whole_lines(tiny_disk: Path) -> None:
    ballast = tiny_disk / "ballast"
    ballast.write_bytes(b"b" * 16384)
    writer = TranscriptWriter.create(tiny_disk, "full")
    writer.append(SessionStarted(session_id="full", question="q", hosts=[], brain="replay"))
    written = 1
    with pytest.raises(TranscriptError) as caught:
        for i in range(100):
            event = ToolExecuted(call_id=f"c{i}", tool="t", input={}, ok=True, output="z" * 9000)
            writer.append(event)
            written += 1
    assert str(writer.path) in str(caught.value)
    assert "No space left" in str(caught.value)
    assert writer.path.read_bytes().endswith(b"\n")
    report = verify(writer.path)
    assert report.ok and report.torn_tail is None and report.events == written
    # Once space is freed, the same writer goes on with the chain where it stopped.
    ballast.unlink()
    writer.append(ErrorEvent(where="store", message="space is back"))
    writer.close()
    report = verify(writer.path)
    assert report.ok and report.events == written + 1
