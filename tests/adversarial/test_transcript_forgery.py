"""Transcripts forged as an attacker would (issue 39, findings 2, 5, 6, 10, 11): a rewrite with
a recomputed chain handed to an honest user's `sleuth resume`, a ledger line appended to hide
a rewrite, readers that must say what `verify` says, links planted in the transcripts folder,
and a signed run cut back to a turn signature. Real keys (ssh-keygen), real ledger, the real
command line, and the official MCP client for the resource."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from sleuth.cli import app
from sleuth.transcripts.ledger import LedgerEntry, append_entry, read_ledger
from sleuth.transcripts.sign import fingerprint, head_bytes, sign
from sleuth.transcripts.signing_keys import find_signer
from tests.mcp_support import McpProject
from tests.signing_support import (
    Key,
    allow,
    ask,
    demo_project,
    events,
    make_key,
    rewrite,
    runner,
    sleuth,
    write_events,
)

from . import figures

EH_PROJ = "\nmodel.layers.61.eh_proj.weight BF16 [7168, 14336]"
"""The line a forger adds to a tool output: the MTP heads look present."""


@pytest.fixture
def alice(tmp_path: Path) -> Key:
    return make_key(tmp_path, "ed25519", "alice")


@pytest.fixture
def signers(tmp_path: Path, alice: Key) -> Path:
    return allow(tmp_path, [("alice@example.com", alice)])


@pytest.fixture
def project(tmp_path: Path, alice: Key, signers: Path) -> Path:
    """Alice's project: her key signs, and she checks signers against her allowed_signers."""
    return demo_project(tmp_path / "project", alice, allowed=signers)


def ledger(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sleuth" / "ledger.jsonl"


def verified(project: Path, path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = sleuth(project, "verify", str(path), "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def add_to_an_output(raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
    call = next(r for r in raws if r["type"] == "tool_executed")
    call["result"]["output"] += EH_PROJ
    return raws


def died_in_third_turn(project: Path, tmp_path: Path) -> tuple[Path, int]:
    """A signed run as it is when it died waiting for its third model turn: no session_ended,
    no `.sig`, no ledger entry; the last event is a turn signature."""
    _, path = ask(project)
    raws = events(path)
    ledger(tmp_path).unlink()
    cut = [i for i, r in enumerate(raws) if r["type"] == "model_turn"][2]
    write_events(path, raws[:cut], rechain=False)
    Path(f"{path}.sig").unlink()
    return path, cut


def forge_prefix(path: Path) -> None:
    """The forger's edit: a tool output changed, the signature events dropped (they would
    fail), every seq, prev and hash recomputed: the chain holds, nothing is signed."""
    rewrite(path, lambda raws: [r for r in add_to_an_output(raws) if r["type"] != "signature"])


# Finding 2: resume signs what it never checked.


def test_an_honest_resume_refuses_a_forged_prefix_and_leaves_it_as_it_was(
    project: Path, tmp_path: Path, signers: Path
) -> None:
    path, _ = died_in_third_turn(project, tmp_path)
    forge_prefix(path)
    forged = path.read_bytes()
    resumed = sleuth(project, "resume", str(path), "--json")
    figures.count("resume_forged_prefixes_signed", int(resumed.exit_code == 0))
    assert resumed.exit_code == 1, resumed.output
    assert "no allowed signature vouches for every event already recorded" in resumed.output
    assert "--trust-unsigned" in resumed.output
    assert path.read_bytes() == forged, "nothing appended, nothing signed"
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"]) == (3, "integrity_only")


def test_a_resumed_runs_signatures_never_vouch_for_the_events_before_it(
    project: Path, tmp_path: Path, signers: Path
) -> None:
    path, _ = died_in_third_turn(project, tmp_path)
    forge_prefix(path)
    before = len(events(path))
    resumed = sleuth(project, "resume", str(path), "--json", "--trust-unsigned")
    assert resumed.exit_code == 0, resumed.output
    start = events(path)[before]
    assert start["type"] == "session_started" and start["resumed_from"] == str(path)
    assert start["prefix_unchecked"].startswith(f"events 0-{before - 1} were not checked")
    code, report = verified(project, path, "--allowed-signers", str(signers))
    figures.count("resume_forged_prefixes_signed", int(report["verdict"] == "signed"))
    assert (code, report["verdict"]) == (3, "integrity_only"), report
    (signer,) = report["signers"]
    assert (signer["first"], signer["covers"]) == (before, len(events(path)))
    assert signer["principals"] == ["alice@example.com"]
    assert report["signed_events"] == len(events(path)) - before
    assert (
        f"events 0-{before - 1} are not signed: `sleuth resume --trust-unsigned`"
        in (report["integrity_only"])
    )
    shown = sleuth(project, "verify", str(path))
    assert f"events {before}-{len(events(path)) - 1} appended and signed by alice" in shown.stdout


def test_a_prefix_signed_by_an_allowed_key_resumes_and_verifies_as_signed(
    project: Path, tmp_path: Path, signers: Path
) -> None:
    """The control: the same resume of an untouched prefix goes on without a flag."""
    path, cut = died_in_third_turn(project, tmp_path)
    resumed = sleuth(project, "resume", str(path), "--json")
    assert resumed.exit_code == 0, resumed.output
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"], report["ledger"]["entries"]) == (0, "signed", 1)
    assert [(s["first"], s["covers"]) for s in report["signers"]] == [
        (0, cut),
        (cut, len(events(path))),
    ]


# Finding 5: one appended ledger line hides a rewrite.


def test_an_appended_ledger_line_for_a_rewritten_session_fails_verify(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    rewrite(path, add_to_an_output)
    last = events(path)[-1]
    append_entry(
        ledger(tmp_path),
        LedgerEntry(
            session_id=events(path)[0]["session_id"],
            transcript=str(path),
            head_seq=last["seq"],
            head_hash=last["hash"],
            status="answered",
        ),
    )
    assert read_ledger(ledger(tmp_path))[1] is None, "the ledger's own chain holds"
    code, report = verified(project, path)
    figures.count("ledger_duplicates_hiding_rewrites", int(code != 1))
    assert code == 1 and report["ledger"]["state"] == "duplicate"
    assert report["ledger"]["entries"] == 2
    assert report["problems"][0]["kind"] == "ledger"
    assert "holds 2 entries for session" in report["problems"][0]["message"]


def test_a_ledger_entry_signed_by_a_key_not_allowed_is_forged(
    tmp_path: Path, alice: Key, signers: Path
) -> None:
    mallory = make_key(tmp_path, "ed25519", "mallory")
    project = demo_project(tmp_path / "p", alice, allowed=signers)
    _, path = ask(project)
    (entry,) = read_ledger(ledger(tmp_path))[0]
    signer = find_signer(str(mallory.private))
    assert signer is not None
    armored = sign(signer, head_bytes(entry.session_id, entry.head_seq, entry.head_hash))
    ledger(tmp_path).unlink()  # the forger writes the ledger afresh: one entry, Mallory's
    append_entry(
        ledger(tmp_path),
        entry.model_copy(update={"signer": fingerprint(signer.public_blob), "sshsig": armored}),
    )
    code, report = verified(project, path)
    figures.count("ledger_duplicates_hiding_rewrites", int(code != 1))
    assert code == 1 and report["ledger"]["state"] == "forged"
    assert "an unknown signer" in report["ledger"]["message"]
    assert f"{mallory.fingerprint()}" in report["ledger"]["message"]


def test_verify_says_how_many_ledger_entries_a_session_has(project: Path) -> None:
    _, path = ask(project)
    code, report = verified(project, path)
    assert (code, report["ledger"]["state"], report["ledger"]["entries"]) == (0, "match", 1)
    assert "ledger: 1 entry for this session" in sleuth(project, "verify", str(path)).stdout


# Finding 6: every reader gives verify's verdict, first.


def rewritten_unsigned_run(tmp_path: Path) -> tuple[Path, Path]:
    """An unsigned run whose tool output was rewritten, chain recomputed: only the ledger
    tells."""
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    rewrite(path, add_to_an_output)
    return project, path


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_show_puts_verifys_ledger_verdict_first_in_every_format(tmp_path: Path, fmt: str) -> None:
    project, path = rewritten_unsigned_run(tmp_path)
    code, report = verified(project, path)
    assert code == 1 and report["ledger"]["state"] == "differs"
    out = tmp_path / f"shown.{fmt}"
    result = runner.invoke(app, ["show", str(path), "--format", fmt, "-o", str(out)])
    assert result.exit_code == 0, result.output
    shown = out.read_text()
    if fmt == "json":
        missed = json.loads(shown)["verified"] is not False
        assert json.loads(shown)["banner"].startswith("NOT VERIFIED")
    else:
        first = shown.index("NOT VERIFIED") if "NOT VERIFIED" in shown else len(shown)
        missed = first > shown.index("grounded")
        assert "differs from the ledger entry" in shown
    figures.count("reader_verdicts_missing", int(missed))
    assert not missed


def test_replay_refuses_what_the_ledger_says_was_rewritten(tmp_path: Path) -> None:
    project, path = rewritten_unsigned_run(tmp_path)
    replayed = sleuth(project, "replay", str(path))
    figures.count("reader_verdicts_missing", int(replayed.exit_code != 1))
    assert replayed.exit_code == 1 and "differs from the ledger entry" in replayed.output


def test_resume_refuses_an_ended_run_cut_back_to_go_on_differently(tmp_path: Path) -> None:
    """Cut an ended, unsigned run back before its findings to have them made anew: the chain
    holds, and only the ledger knows the session ended."""
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    raws = events(path)
    cut = [i for i, r in enumerate(raws) if r["type"] == "model_turn"][1]
    write_events(path, raws[:cut], rechain=False)
    resumed = sleuth(project, "resume", str(path))
    figures.count("reader_verdicts_missing", int(resumed.exit_code != 1))
    assert resumed.exit_code == 1 and "differs from the ledger entry" in resumed.output
    assert len(events(path)) == cut, "nothing appended"


def test_the_mcp_transcript_resource_gives_the_verdict_first(tmp_path: Path) -> None:
    _, path = rewritten_unsigned_run(tmp_path)
    (tmp_path / "mcp").mkdir()
    mcp = McpProject.create(tmp_path / "mcp")
    mcp.transcripts.mkdir()
    shutil.copy(path, mcp.transcripts / path.name)
    seen: dict[str, Any] = {}

    async def session() -> None:
        async with mcp.client("stdio") as client:
            seen["read"] = await client.read_resource(f"sleuth://transcripts/{path.name}")

    anyio.run(session)
    verdict, transcript = seen["read"].contents
    missed = not verdict.text.startswith("NOT VERIFIED")
    figures.count("reader_verdicts_missing", int(missed))
    assert not missed and "differs from the ledger entry" in verdict.text
    assert transcript.text == path.read_text()


# Finding 10: links planted in the transcripts folder; the repair keeps 0600.


def test_planted_links_are_never_written_through_and_the_repair_keeps_0600(
    project: Path, tmp_path: Path, signers: Path
) -> None:
    path, cut = died_in_third_turn(project, tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"seq":%d,"ts":"2026-' % cut)  # torn: the run died mid-event
    victims = {}
    for name in (f"{path.name}.torn", f".{path.name}.tmp", f".{path.name}.sig.tmp"):
        victim = tmp_path / f"victim-{name.strip('.')}"
        victim.write_text("precious\n")
        (path.parent / name).symlink_to(victim)
        victims[name] = victim
    old = os.umask(0o022)
    try:
        resumed = sleuth(project, "resume", str(path), "--json")
    finally:
        os.umask(old)
    assert resumed.exit_code == 0, resumed.output
    written = [name for name, victim in victims.items() if victim.read_text() != "precious\n"]
    figures.count("planted_links_written_through", len(written))
    assert written == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the repair keeps the transcript 0600"
    sig = Path(f"{path}.sig")
    assert not sig.is_symlink() and stat.S_IMODE(sig.stat().st_mode) == 0o600
    repair = next(e for e in events(path) if e["type"] == "repaired")
    backup = Path(repair["backup"])
    assert backup.name == f"{path.name}.torn.2" and not backup.is_symlink()
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"]) == (0, "signed")


def test_a_link_planted_as_the_signature_file_is_not_read_through(
    project: Path, tmp_path: Path
) -> None:
    path, _ = died_in_third_turn(project, tmp_path)
    sig_victim = tmp_path / "victim-sig"
    sig_victim.write_text("precious\n")
    Path(f"{path}.sig").symlink_to(sig_victim)
    refused = sleuth(project, "resume", str(path), "--json")
    assert refused.exit_code == 1 and "is a symbolic link" in refused.output
    assert sig_victim.read_text() == "precious\n"


def test_a_transcript_that_is_a_link_is_neither_read_nor_resumed(
    project: Path, tmp_path: Path
) -> None:
    target, _ = died_in_third_turn(project, tmp_path)
    before = target.read_bytes()
    link = target.with_name("planted.jsonl")
    link.symlink_to(target)
    resumed = sleuth(project, "resume", str(link))
    assert resumed.exit_code == 1 and "symbolic link" in resumed.output
    assert target.read_bytes() == before
    shown = runner.invoke(app, ["show", str(link)])
    assert shown.exit_code == 1 and "symbolic link" in shown.output


# Finding 11: a transcript cut back to a turn signature, no ledger at hand.


def test_a_run_cut_back_to_a_turn_signature_is_not_a_complete_signed_run(
    project: Path, tmp_path: Path
) -> None:
    _, path = ask(project)
    raws = events(path)
    cut = max(i for i, r in enumerate(raws) if r["type"] == "signature") + 1
    write_events(path, raws[:cut], rechain=False)  # a clean cut at a turn signature
    Path(f"{path}.sig").unlink()
    ledger(tmp_path).unlink()  # checked where the ledger is not at hand
    code, report = verified(project, path)
    figures.count("cut_back_verified_complete", int(code == 0))
    assert (code, report["verdict"], report["ledger"]) == (3, "signed_prefix", None)
    last = cut - 1
    said = sleuth(project, "verify", str(path)).stdout
    assert f"signed through event {last}; the run did not end here" in " ".join(said.split())
    shown = sleuth(project, "show", str(path), "--format", "md")
    assert shown.stdout.startswith(f"SIGNED THROUGH EVENT {last}, NOT THE END")
