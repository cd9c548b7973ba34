"""The --json outputs are a contract: each validates against the JSON Schema `sleuth schema NAME`
prints, carries `schema_version` and the transcript's path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from sleuth import outputs
from sleuth.cli import app
from sleuth.demo_deployment import build_demo
from sleuth.transcripts.verify import verify

runner = CliRunner()
REFERENCE = Path(__file__).resolve().parent.parent / "transcripts" / "mtp-heads.jsonl"
KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def _checked(name: str, args: list[str], code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    shown = runner.invoke(app, ["schema", name])
    assert shown.exit_code == 0
    document = json.loads(result.stdout)
    jsonschema.validate(document, json.loads(shown.stdout))
    assert document["schema_version"] == 1
    return document


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    build_demo(tmp_path / "demo")
    config = tmp_path / "sleuth.toml"
    config.write_text(f'[hosts.local]\nroots = ["{tmp_path / "demo"}"]\n')
    return config


def test_verify_and_replay_json_match_their_schemas() -> None:
    report = _checked("verify", ["verify", str(REFERENCE), "--json"], code=3)
    assert report["transcript"] == str(REFERENCE) and report["ok"] is True
    assert report["verdict"] == "integrity_only" and report["integrity_only"] == "not signed"
    replayed = _checked("replay", ["replay", str(REFERENCE), "--json"])
    assert replayed["transcript"] == str(REFERENCE) and replayed["ok"] is True


def test_ask_json_matches_its_schema_and_names_its_transcript(demo: Path, tmp_path: Path) -> None:
    question = "Does DeepSeek-V3-demo-FP8 still carry its MTP heads?"
    args = ["ask", question, "--json", "--config", str(demo), "--transcripts", str(tmp_path / "t")]
    answer = _checked("ask", args)
    assert answer["brain"] == "playbook" and answer["findings"]
    assert Path(answer["transcript"]).parent == tmp_path / "t"
    assert verify(Path(answer["transcript"])).ok


def test_tool_json_matches_its_schema_and_its_call_is_recorded(demo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "t"
    args = ["tool", "list_dir", "path=models", "--json", "--config", str(demo)]
    result = _checked("tool", [*args, "--transcripts", str(folder)])
    assert result["ok"] is True and "Qwen3.5-MoE-demo-NVFP4" in result["output"]
    transcript = Path(result["transcript"])
    assert transcript.parent == folder and verify(transcript).ok
    recorded = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [e["type"] for e in recorded] == ["session_started", "tool_executed", "session_ended"]
    assert recorded[1]["result"]["output"] == result["output"]


def test_preflight_json_matches_its_schema_and_its_call_is_recorded(
    demo: Path, tmp_path: Path
) -> None:
    model = tmp_path / "demo" / "models" / "DeepSeek-V3-demo-FP8"
    args = ["preflight", "vllm", str(model), "--json", "--config", str(demo), "--no-sign"]
    # No vLLM is installed here: the launch would fail, so it exits 1 with the report.
    result = _checked("preflight", [*args, "--transcripts", str(tmp_path / "t")], code=1)
    assert result["ok"] is True and result["data"]["blocked"] is True
    failing = [c["name"] for c in result["data"]["checks"] if c["status"] == "fail"]
    assert "engine_installed" in failing
    assert verify(Path(result["transcript"])).ok


def test_diagnose_json_matches_its_schema_and_names_its_log() -> None:
    log = Path(__file__).parent / "fixtures" / "engine_logs" / "001-vllm-kv_cache_too_small.log"
    result = _checked("diagnose", ["diagnose", str(log), "--json"])
    assert result["source"] == str(log)
    assert result["diagnosis"]["kind"] == "kv_cache_too_small"


def test_an_unknown_schema_name_is_a_usage_error() -> None:
    result = runner.invoke(app, ["schema", "nope"])
    assert result.exit_code == 2
    known = (
        "ask, bench, bench-ab, bench-compare, bench-goodput, diagnose, preflight, replay, "
        "tool, verify"
    )
    assert f"known: {known}" in result.output
    assert set(runner.invoke(app, ["schema"]).stdout.split()) >= set(outputs.OUTPUTS)
