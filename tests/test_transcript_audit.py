"""Audit trails that cannot be rewritten (issue 25): signed runs of `sleuth ask` with real keys
and a real ssh-agent, then tampered with as a forger would, and read by every reader."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sleuth.cli import app
from sleuth.transcripts.events import ErrorEvent, SessionEnded, SessionStarted
from sleuth.transcripts.ledger import ledger_path
from sleuth.transcripts.seal import Seal
from sleuth.transcripts.sign import head_bytes
from sleuth.transcripts.signing_keys import find_signer
from sleuth.transcripts.store import TranscriptWriter, event_hash
from sleuth.transcripts.verify import verify
from tests.signing_support import (
    Key,
    agent_holding,
    allow,
    ask,
    demo_project,
    events,
    make_key,
    need,
    rewrite,
    runner,
    sleuth,
    write_events,
)


@pytest.fixture
def alice(tmp_path: Path) -> Key:
    return make_key(tmp_path, "ed25519", "alice")


@pytest.fixture
def project(tmp_path: Path, alice: Key) -> Path:
    return demo_project(tmp_path / "project", alice)


@pytest.fixture
def checked_project(tmp_path: Path, alice: Key) -> Path:
    """`project` whose sleuth.toml also names alice as the allowed signer."""
    signers = allow(tmp_path, [("alice@example.com", alice)])
    return demo_project(tmp_path / "project", alice, allowed=signers)


def verified(project: Path, path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = sleuth(project, "verify", str(path), "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def test_a_signed_run_verifies_as_signed_by_its_principal(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    result, path = ask(project)
    assert f"signing the transcript with ssh-ed25519 {alice.fingerprint()}" in result.output
    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"], report["problems"]) == (0, "signed", [])
    (signer,) = report["signers"]
    assert signer["principals"] == ["alice@example.com"]
    assert signer["fingerprint"] == alice.fingerprint()
    assert report["signed_events"] == report["events"] == len(events(path))
    turns = [e for e in events(path) if e["type"] == "model_turn"]
    signatures = [e for e in events(path) if e["type"] == "signature"]
    assert len(signatures) == len(turns), "one signature at each turn boundary"
    assert report["ledger"]["state"] == "match"
    shown = sleuth(project, "verify", str(path), "--allowed-signers", str(signers))
    assert "SIGNED" in shown.stdout and "signed by alice@example.com" in shown.stdout


def test_without_allowed_signers_a_signed_run_is_integrity_only(project: Path) -> None:
    _, path = ask(project)
    code, report = verified(project, path)
    assert (code, report["verdict"]) == (3, "integrity_only")
    assert "signer is not checked" in report["integrity_only"]


def test_ssh_keygen_verifies_the_detached_signature_over_the_documented_head(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    signers = allow(tmp_path, [("alice@example.com", alice)])
    head = tmp_path / "head.txt"
    result = sleuth(project, "verify", str(path), "--allowed-signers", str(signers),
                    "--export-head", str(head))  # fmt: skip
    assert result.exit_code == 0, result.output
    first, last = events(path)[0], events(path)[-1]
    assert (
        head.read_bytes()
        == (
            f"sleuth-transcript-head v1\n{first['session_id']}\n{last['seq']}\n{last['hash']}\n"
        ).encode()
    )
    keygen = subprocess.run(
        [need("ssh-keygen"), "-Y", "verify", "-f", str(signers), "-I", "alice@example.com",
         "-n", "sleuth-transcript", "-s", f"{path}.sig"],
        input=head.read_bytes(), capture_output=True,
    )  # fmt: skip
    assert keygen.returncode == 0, keygen.stderr
    assert b'Good "sleuth-transcript" signature for alice@example.com' in keygen.stdout
    other = subprocess.run(
        [need("ssh-keygen"), "-Y", "verify", "-f", str(signers), "-I", "alice@example.com",
         "-n", "sleuth-transcript", "-s", f"{path}.sig"],
        input=head.read_bytes().replace(b"\n", b"\r\n"), capture_output=True,
    )  # fmt: skip
    assert other.returncode != 0, "any other bytes fail"


def test_a_full_rewrite_with_a_recomputed_chain_fails_on_its_signature(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    signers = allow(tmp_path, [("alice@example.com", alice)])

    def forge(raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
        call = next(r for r in raws if r["type"] == "tool_executed")
        call["result"]["output"] += "\nmodel.layers.61.eh_proj.weight BF16 [7168, 14336]"
        return raws

    rewrite(path, forge)
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and report["verdict"] == "failed"
    assert report["problems"][0]["kind"] == "signature"
    assert "rewritten after they were signed" in report["problems"][0]["message"]

    # Dropping the signature events too leaves the .sig, which signs a head no longer there.
    rewrite(path, lambda raws: [r for r in raws if r["type"] != "signature"])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and report["problems"][0]["kind"] == "signature"
    assert "changed after it was signed" in report["problems"][0]["message"]


def test_a_forger_who_re_signs_with_their_own_key_is_an_unknown_signer(
    tmp_path: Path, alice: Key
) -> None:
    mallory = make_key(tmp_path, "ed25519", "mallory")
    project = demo_project(tmp_path / "p", mallory)
    _, path = ask(project)
    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and report["problems"][0]["kind"] == "signature"
    assert f"{mallory.fingerprint()} that signed" in report["problems"][0]["message"]
    assert "is not in" in report["problems"][0]["message"]


def test_a_key_allowed_only_for_another_namespace_is_refused(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    signers = allow(tmp_path, [("alice@example.com", alice)], options='namespaces="file,git"')
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and "namespace sleuth-transcript" in report["problems"][0]["message"]


def test_an_unsigned_rewrite_differs_from_the_ledger(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    result, path = ask(project, "--no-sign")
    assert "signing" not in result.output and not Path(f"{path}.sig").exists()
    code, report = verified(project, path)
    assert (code, report["integrity_only"], report["ledger"]["state"]) == (
        3,
        "not signed",
        "match",
    )

    def forge(raws: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raws[-1]["summary"] = "The MTP heads are all there."
        return raws

    rewrite(path, forge)
    code, report = verified(project, path)
    assert code == 1 and report["problems"][0]["kind"] == "ledger"
    assert report["problems"][0]["message"].startswith("differs from the ledger entry of 20")
    (other_project := tmp_path / "q").mkdir()
    (other_project / "sleuth.toml").write_text('[ledger]\npath = "/nonexistent/ledger.jsonl"\n')
    code, report = verified(other_project, path)
    assert code == 3 and report["ledger"] is None, "no ledger there: integrity only, said so"


def test_a_transcript_not_in_the_ledger_says_so(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    _, path = ask(project, "--no-sign")
    rewrite(path, lambda raws: [{**raws[0], "session_id": "f0rged"}, *raws[1:]])
    code, report = verified(project, path)
    assert code == 3 and report["ledger"]["state"] == "not_in_ledger"
    assert "not in the ledger" in sleuth(project, "verify", str(path)).stdout


def test_an_event_after_session_ended_is_refused_or_flagged_by_every_reader(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    raws = events(path)
    forged = {
        "seq": raws[-1]["seq"] + 1,
        "ts": raws[-1]["ts"],
        "type": "finding",
        "call_id": "pb_1_1",
        "finding": {"claim": "All is well.", "verdict": "yes", "confidence": 1.0},
        "prev": raws[-1]["hash"],
    }
    forged["hash"] = event_hash(forged)  # the chain holds: only the end gives it away
    write_events(path, [*raws, forged], rechain=False)
    line = len(raws) + 1

    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1
    assert (report["problems"][0]["kind"], report["problems"][0]["line"]) == ("after_end", line)
    shown = runner.invoke(app, ["show", str(path), "--format", "md"])
    assert shown.exit_code == 0 and shown.stdout.startswith(f"NOT VERIFIED: line {line}")
    replayed = sleuth(project, "replay", str(path))
    assert replayed.exit_code == 1 and "after session_ended" in replayed.output
    resumed = sleuth(project, "resume", str(path))
    assert resumed.exit_code == 1 and "after session_ended" in resumed.output


def died_in_third_turn(project: Path, tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """A signed run cut where it would be had it died in its third turn's model call: no
    `.sig` (written at the end only) and no ledger entry (the ledger would tell the cut)."""
    _, path = ask(project)
    raws = events(path)
    (tmp_path / "state" / "sleuth" / "ledger.jsonl").unlink()
    cut = [i for i, r in enumerate(raws) if r["type"] == "model_turn"][2]
    kept = raws[:cut]
    assert kept[-1]["type"] == "signature"
    write_events(path, kept, rechain=False)
    Path(f"{path}.sig").unlink()
    return path, kept


def test_a_signed_run_resumed_without_a_key_says_so_and_is_integrity_only(
    checked_project: Path, alice: Key, tmp_path: Path
) -> None:
    project = checked_project
    path, kept = died_in_third_turn(project, tmp_path)
    resumed = sleuth(project, "resume", str(path), "--no-sign", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert events(path)[len(kept)]["type"] == "session_started"
    assert events(path)[len(kept) + 1]["where"] == "sign"
    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"]) == (3, "integrity_only")
    assert "resumed without a key" in report["integrity_only"]
    assert report["signed_events"] == len(kept)


def test_a_torn_tail_is_named_and_resume_goes_on_with_a_repair_event(
    checked_project: Path, alice: Key, tmp_path: Path
) -> None:
    project = checked_project
    path, kept = died_in_third_turn(project, tmp_path)
    torn = b'{"seq":%d,"ts":"2026-' % len(kept)
    with open(path, "ab") as handle:
        handle.write(torn)
    signers = allow(tmp_path, [("alice@example.com", alice)])

    head = tmp_path / "head"
    shown = sleuth(project, "verify", str(path), "--allowed-signers", str(signers),
                   "--export-head", str(head))  # fmt: skip
    assert "torn: the run died" in shown.stdout and "no session_ended" in shown.stdout
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"]) == (3, "signed_prefix"), "signed, but the run did not end"
    assert report["signed_events"] == len(kept) and not report["ended"]
    # The latest signature is the last signature event's; ssh-keygen checks it as exported.
    assert head.read_bytes() == head_bytes(
        kept[0]["session_id"], kept[-1]["head_seq"], kept[-1]["head_hash"]
    )
    keygen = subprocess.run(
        [need("ssh-keygen"), "-Y", "verify", "-f", str(signers), "-I", "alice@example.com",
         "-n", "sleuth-transcript", "-s", f"{head}.sig"],
        input=head.read_bytes(), capture_output=True,
    )  # fmt: skip
    assert keygen.returncode == 0, keygen.stderr

    resumed = sleuth(project, "resume", str(path), "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["status"] == "answered"
    after = events(path)
    repair = after[len(kept) + 1]
    assert repair["type"] == "repaired" and repair["dropped_bytes"] == len(torn)
    assert repair["dropped_sha256"] == hashlib.sha256(torn).hexdigest()
    assert Path(repair["backup"]).read_bytes().endswith(torn)
    assert after[len(kept)]["type"] == "session_started", "the resumed run's start comes first"
    assert after[len(kept)]["resumed_from"] == str(path)
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"], report["ledger"]["state"]) == (0, "signed", "match")


def test_a_signed_run_without_its_end_signature_fails(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    Path(f"{path}.sig").unlink()
    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and "its end is not signed" in report["problems"][0]["message"]


def test_a_cut_off_end_is_caught_by_the_detached_signature(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    _, path = ask(project)
    raws = events(path)
    write_events(path, raws[:-3], rechain=False)  # a clean cut: the chain still holds
    signers = allow(tmp_path, [("alice@example.com", alice)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert code == 1 and "changed after it was signed" in report["problems"][0]["message"]


@pytest.mark.parametrize("kind", ["ed25519", "rsa", "ecdsa"])
def test_ssh_agent_keys_sign_and_the_start_line_names_them(tmp_path: Path, kind: str) -> None:
    key = make_key(tmp_path, kind, f"agent_{kind}")
    project = demo_project(tmp_path / "p")
    with agent_holding(tmp_path, key):
        result, path = ask(project)
    algorithm = {"ed25519": "ssh-ed25519", "rsa": "ssh-rsa", "ecdsa": "ecdsa-sha2-nistp256"}
    assert (
        f"signing the transcript with {algorithm[kind]} {key.fingerprint()} from ssh-agent"
        in result.output
    )
    signers = allow(tmp_path, [("ops@example.com", key)])
    code, report = verified(project, path, "--allowed-signers", str(signers))
    assert (code, report["verdict"]) == (0, "signed")
    head = events(path)[-1]
    keygen = subprocess.run(
        [need("ssh-keygen"), "-Y", "verify", "-f", str(signers), "-I", "ops@example.com",
         "-n", "sleuth-transcript", "-s", f"{path}.sig"],
        input=head_bytes(events(path)[0]["session_id"], head["seq"], head["hash"]),
        capture_output=True,
    )  # fmt: skip
    assert keygen.returncode == 0, keygen.stderr


def test_a_configured_key_the_agent_holds_signs_through_the_agent(tmp_path: Path) -> None:
    key = make_key(tmp_path, "ed25519", "held")
    project = demo_project(tmp_path / "p", Key(key.public))  # [sign] key names the .pub
    with agent_holding(tmp_path, key):
        result, _ = ask(project)
    assert f"{key.fingerprint()} from ssh-agent" in result.output


def test_no_key_means_unsigned_said_once_and_a_bad_key_is_a_usage_error(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    result, path = ask(project)
    assert result.output.count("not signing the transcript: no SSH key") == 1
    assert not Path(f"{path}.sig").exists()
    assert not any(e["type"] == "signature" for e in events(path))
    (project / "sleuth.toml").write_text(
        (project / "sleuth.toml").read_text() + f'[sign]\nkey = "{tmp_path / "nokey"}"\n'
    )
    refused = sleuth(project, "ask", "q")
    assert refused.exit_code == 2 and "--no-sign" in refused.output


def test_a_key_that_stops_signing_mid_run_is_recorded_and_the_rest_is_integrity_only(
    tmp_path: Path, alice: Key
) -> None:
    ledger = ledger_path(str(tmp_path / "ledger.jsonl"))
    with agent_holding(tmp_path, alice) as sock:
        seal = Seal(find_signer(None), ledger)
        writer = TranscriptWriter.create(tmp_path / "t", "agentgone", seal)
        writer.append(SessionStarted(session_id="agentgone", question="q", hosts=[], brain="x"))
        writer.checkpoint()
        writer.append(ErrorEvent(where="loop", message="a turn"))
    Path(sock).unlink(missing_ok=True)  # the agent is gone
    writer.checkpoint()
    writer.append(SessionEnded(status="answered"))
    writer.close()
    raws = events(writer.path)
    assert [r["type"] for r in raws] == [
        "session_started", "signature", "error", "error", "session_ended"
    ]  # fmt: skip
    assert raws[3]["where"] == "sign" and raws[3]["message"].startswith("signing stopped")
    assert writer.warnings and not Path(f"{writer.path}.sig").exists()
    report = verify(writer.path, allowed_signers=None, ledger=ledger)
    assert report.ok and report.verdict == "integrity_only" and report.signed_events == 2
    assert report.integrity_only and "events 2-4 are not signed: signing stopped" in (
        report.integrity_only
    )
    assert report.ledger is not None and report.ledger.state == "match"


def test_the_readmes_openssh_only_commands_work_as_printed(
    project: Path, alice: Key, tmp_path: Path
) -> None:
    need("jq")
    _, path = ask(project)
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index("T=transcripts/T.jsonl\n")
    block = readme[start : readme.index("```", start)].splitlines()
    by_hand, keygen = block[1], block[2]
    assert by_hand.startswith("{ echo 'sleuth-transcript-head v1'")
    assert keygen.startswith("ssh-keygen -Y verify")
    allow(tmp_path, [("alice@example.com", alice)])  # ./allowed_signers, as the README names
    done = subprocess.run(
        ["bash", "-e", "-c", f"T={path}\n{by_hand}\n{keygen}"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert 'Good "sleuth-transcript" signature for alice@example.com' in done.stdout
    exported = tmp_path / "exported"
    sleuth(project, "verify", str(path), "--export-head", str(exported))
    assert (tmp_path / "head").read_bytes() == exported.read_bytes()


def test_ask_json_says_who_signed_the_transcript_or_why_none_did(
    tmp_path: Path, alice: Key
) -> None:
    signers = allow(tmp_path, [("alice@example.com", alice)])
    extra = f'allowed_signers = "{signers}"\n'
    signed = demo_project(tmp_path / "signed", alice, extra)
    result, path = ask(signed, "--json")
    signing = json.loads(result.stdout)["signing"]
    assert signing == {
        "signed": True,
        "key_type": "ssh-ed25519",
        "fingerprint": alice.fingerprint(),
        "source": str(alice.private),
        "principals": ["alice@example.com"],
        "principals_note": None,
        "why_not": None,
    }
    code, report = verified(signed, path)  # verify names the same signer
    (signer,) = report["signers"]
    assert code == 0 and (signer["fingerprint"], signer["principals"]) == (
        signing["fingerprint"],
        signing["principals"],
    )
    bob = make_key(tmp_path, "ed25519", "bob")  # an agent's key that no allowed_signers names
    plain = demo_project(tmp_path / "plain")
    with agent_holding(tmp_path, bob):
        by_agent = json.loads(ask(plain, "--json")[0].stdout)["signing"]
        refused = json.loads(ask(plain, "--json", "--no-sign")[0].stdout)["signing"]
    assert by_agent["signed"] and by_agent["source"] == "ssh-agent"
    assert by_agent["fingerprint"] == bob.fingerprint() and by_agent["principals"] == []
    assert "no allowed_signers file" in by_agent["principals_note"]
    assert refused["signed"] is False and refused["fingerprint"] is None
    assert "--no-sign" in refused["why_not"]
    unsigned = json.loads(ask(plain, "--json")[0].stdout)["signing"]  # no agent, no [sign] key
    assert unsigned["signed"] is False and "no SSH key" in unsigned["why_not"]
