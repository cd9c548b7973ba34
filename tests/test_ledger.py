"""The local ledger: one hash-chained line per ended session, appended under flock and fsynced,
and the anchor `sleuth verify` checks a transcript's final head against."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sleuth.transcripts.ledger import LedgerEntry, append_entry, ledger_path, read_ledger
from tests.signing_support import ask, demo_project, sleuth


def entry(n: int) -> LedgerEntry:
    return LedgerEntry(
        session_id=f"s{n}", transcript=f"/t/{n}.jsonl", head_seq=n, head_hash=f"{n:064x}",
        status="answered",
    )  # fmt: skip


def test_entries_chain_and_an_edit_breaks_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sleuth" / "ledger.jsonl"
    written = [append_entry(path, entry(n)) for n in range(3)]
    assert [e.seq for e in written] == [0, 1, 2]
    assert [e.prev for e in written] == ["", written[0].hash, written[1].hash]
    entries, broken = read_ledger(path)
    assert broken is None and [e.session_id for e in entries] == ["s0", "s1", "s2"]
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"status":"answered"', '"status":"refused"')
    path.write_text("".join(lines))
    assert read_ledger(path)[1] == f"{path}:2 breaks the ledger's chain: it was edited or removed"


def test_an_excerpt_from_a_log_store_reads_and_an_edited_one_does_not(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    for n in range(5):
        append_entry(path, entry(n))
    excerpt = tmp_path / "shipped.jsonl"
    excerpt.write_text("".join(path.read_text().splitlines(keepends=True)[2:]))
    entries, broken = read_ledger(excerpt)
    assert broken is None and [e.seq for e in entries] == [2, 3, 4]
    lines = excerpt.read_text().splitlines(keepends=True)
    excerpt.write_text(lines[0] + lines[2])  # an entry taken out of the middle
    assert (
        read_ledger(excerpt)[1]
        == f"{excerpt}:2 breaks the ledger's chain: it was edited or removed"
    )


def test_a_torn_last_line_is_cut_before_the_next_entry(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    append_entry(path, entry(0))
    with open(path, "ab") as handle:
        handle.write(b'{"seq":1,"ts":"20')
    after = append_entry(path, entry(1))
    entries, broken = read_ledger(path)
    assert broken is None and [e.seq for e in entries] == [0, 1] and after.seq == 1


def test_sessions_ending_at_once_in_several_processes_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    program = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from sleuth.transcripts.ledger import LedgerEntry, append_entry
        for i in range(15):
            append_entry(Path({str(path)!r}), LedgerEntry(
                session_id=f"p{{sys.argv[1]}}-{{i}}", transcript="t", head_seq=i,
                head_hash="0" * 64, status="answered"))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", program, str(n)]) for n in range(4)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    entries, broken = read_ledger(path)
    assert broken is None
    assert [e.seq for e in entries] == list(range(60))
    assert len({e.session_id for e in entries}) == 60


def test_the_ledger_lives_in_the_state_directory_unless_configured(tmp_path: Path) -> None:
    assert ledger_path(None, {"XDG_STATE_HOME": "/x"}) == Path("/x/sleuth/ledger.jsonl")
    assert ledger_path(None, {}) == Path("~/.local/state/sleuth/ledger.jsonl").expanduser()
    assert (
        ledger_path("~/audit.jsonl", {"XDG_STATE_HOME": "/x"}) == Path("~/audit.jsonl").expanduser()
    )


def test_verify_fails_when_the_ledger_itself_was_edited(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    ledger = tmp_path / "state" / "sleuth" / "ledger.jsonl"
    (line,) = ledger.read_text().splitlines()
    ledger.write_text(line.replace('"status":"answered"', '"status":"refused"') + "\n")
    result = sleuth(project, "verify", str(path), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["ledger"]["state"] == "broken"
    assert report["problems"][0]["kind"] == "ledger"


@pytest.mark.parametrize("cut", [1, 4])
def test_an_unsigned_transcript_cut_short_differs_from_the_ledger(tmp_path: Path, cut: int) -> None:
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-cut]))  # a clean cut: the chain still holds
    result = sleuth(project, "verify", str(path), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["ledger"]["state"] == "differs"
    assert f"the file has {len(lines) - cut}" in report["problems"][0]["message"]
