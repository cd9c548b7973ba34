"""Transcripts without model turns are sealed too: a `sleuth tool`, `sleuth preflight` or
`sleuth bench` call and an MCP session are signed (after each call, and at the end) and
entered in the ledger like `sleuth ask`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.bench_support import synthetic_server
from tests.mcp_support import McpProject
from tests.signing_support import Key, allow, events, make_key, sleuth


@pytest.fixture
def alice(tmp_path: Path) -> Key:
    return make_key(tmp_path, "ed25519", "alice")


def verified(project: Path, path: Path, signers: Path) -> tuple[int, dict[str, Any]]:
    result = sleuth(project, "verify", str(path), "--json", "--allowed-signers", str(signers))
    return result.exit_code, json.loads(result.stdout)


def test_a_sleuth_tool_transcript_is_signed_and_in_the_ledger(tmp_path: Path, alice: Key) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("one\ntwo\n")
    (project / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{project}"]\n[sign]\nkey = "{alice.private}"\n'
    )
    read = ["tool", "read_lines", f"path={project / 'notes.txt'}"]
    signed_and_not(tmp_path, alice, project, read)


def test_a_sleuth_preflight_transcript_is_signed_and_in_the_ledger(
    tmp_path: Path, alice: Key
) -> None:
    project = tmp_path / "project"
    model = project / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    (project / "sleuth.toml").write_text(
        f'[hosts.local]\nroots = ["{project}"]\n[sign]\nkey = "{alice.private}"\n'
    )
    # No engine is installed: the launch would fail (exit 1), and the check is recorded.
    signed_and_not(tmp_path, alice, project, ["preflight", "vllm", str(model)], expected_exit=1)


def test_a_sleuth_bench_transcript_is_signed_and_in_the_ledger(tmp_path: Path, alice: Key) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "sleuth.toml").write_text(f'[sign]\nkey = "{alice.private}"\n')
    load = ["-m", "m", "-c", "1", "-n", "2", "--output-len", "4", "--input-len", "4"]
    results = ["--warmup", "0", "--out-dir", str(tmp_path / "results")]
    with synthetic_server({"m": {"ttft_ms": 5, "itl_ms": 1.0}}, realtime=False) as url:
        signed_and_not(tmp_path, alice, project, ["bench", url, *load, *results])


def signed_and_not(
    tmp_path: Path, alice: Key, project: Path, command: list[str], expected_exit: int = 0
) -> None:
    """The command's one-call transcript is signed and in the ledger; with --no-sign it
    verifies as integrity only."""
    signers = allow(tmp_path, [("alice@example.com", alice)])
    for folder, extra in (("signed", []), ("plain", ["--no-sign"])):
        out = tmp_path / folder
        result = sleuth(project, *command, "--transcripts", str(out), *extra)
        assert result.exit_code == expected_exit, result.output
        (path,) = out.glob("*.jsonl")
        code, report = verified(project, path, signers)
        if not extra:
            assert (code, report["verdict"], report["problems"]) == (0, "signed", [])
            assert report["ledger"]["state"] == "match"
        else:
            assert (code, report["verdict"]) == (3, "integrity_only")


def test_an_mcp_session_is_signed_after_each_call_and_at_its_end(
    tmp_path: Path, alice: Key
) -> None:
    project = McpProject.create(tmp_path)
    toml = project.root / "sleuth.toml"
    toml.write_text(toml.read_text() + f'\n[sign]\nkey = "{alice.private}"\n')

    async def session() -> None:
        async with project.client("stdio") as client:
            for _ in range(2):
                result = await client.call_tool("read_lines", {"path": "notes.txt"})
                assert not result.is_error

    asyncio.run(session())
    (path,) = project.transcript_paths()
    kinds = [e["type"] for e in events(path)]
    calls = kinds.count("tool_executed")
    assert calls == 2 and kinds.count("signature") == calls, kinds
    code, report = verified(project.root, path, allow(tmp_path, [("alice@example.com", alice)]))
    assert (code, report["verdict"], report["problems"]) == (0, "signed", [])
