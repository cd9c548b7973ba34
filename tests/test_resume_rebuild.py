"""`sleuth resume` rebuilds the run as it was: the brain's options from session_started, the
recorded limits, and a note wherever today's settings or flags differ (issue 25.5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.replay.rebuild import BrainOverrides, rebuild_brain, recorded_limits
from sleuth.cli import app
from sleuth.config import BrainSettings, Limits, Settings
from sleuth.transcripts.events import ModelTurn, SessionStarted
from sleuth.transcripts.store import load
from tests.scripted_api import ScriptedAPI
from tests.test_agent_anthropic import workspace
from tests.test_replay import script

__all__ = ["workspace"]
runner = CliRunner()
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
MODELS = [{"id": "m", "max_model_len": 8192}]


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


def _config(tmp_path: Path, workspace: Path, extra: str = "") -> Path:
    config = tmp_path / "sleuth.toml"
    config.write_text(f'[hosts.local]\nroots = ["{workspace}"]\n{extra}')
    return config


def _crashed_run(tmp_path: Path, workspace: Path, api: ScriptedAPI) -> Path:
    """`sleuth ask` over an OpenAI-compatible server with non-default options, cut off as if
    killed before its second model turn."""
    config = _config(tmp_path, workspace, "[limits]\ntimeout_s = 7\n")
    args = ["ask", "Is there a NextN class?", "--config", str(config), "--json", "--no-sign",
            "--base-url", api.url, "--model", "m", "--tool-choice", "required",
            "--max-tokens", "1500", "--transcripts", str(tmp_path / "t")]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    path = Path(json.loads(result.stdout)["transcript"])
    second = next(e.seq for e in load(path).events if isinstance(e, ModelTurn) and e.turn == 2)
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:second]))
    (tmp_path / "state" / "sleuth" / "ledger.jsonl").unlink()  # a killed run has no entry
    return path


def _start(path: Path) -> SessionStarted:
    start = load(path).events[0]
    assert isinstance(start, SessionStarted)
    return start


def test_session_started_records_the_brain_as_built_and_probed(
    tmp_path: Path, workspace: Path
) -> None:
    with ScriptedAPI(script("local"), flavour="openai", models=MODELS) as api:
        path = _crashed_run(tmp_path, workspace, api)
    options = _start(path).brain_options
    assert options is not None
    assert (options.endpoint, options.max_tokens, options.tool_choice) == (
        api.url,
        1500,
        "required",
    )
    assert options.context_window == 8192, "the served max_model_len the probe read"
    assert options.attempts == 3


def test_resume_uses_the_recorded_brain_over_todays_settings_and_says_so(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twice = script("local") + script("local")[1:]  # the run, then what the resume asks
    with ScriptedAPI(twice, flavour="openai", models=MODELS) as api:
        path = _crashed_run(tmp_path, workspace, api)
        served = len(api.requests)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # today: elsewhere
        config = _config(
            tmp_path, workspace, "[brain]\nmax_tokens = 600\n[limits]\ntimeout_s = 30\n"
        )
        args = ["resume", str(path), "--json", "--config", str(config), "--trust-unsigned"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        bodies = [r.body for r in api.requests[served:] if r.path.endswith("/completions")]
    assert json.loads(result.stdout)["status"] == "answered"
    assert bodies and all(b["max_tokens"] <= 1500 for b in bodies)
    assert bodies[0]["max_tokens"] > 600, "the recorded max_tokens, not today's"
    notes = result.output
    assert (
        f"endpoint: recorded {api.url}, OPENAI_BASE_URL says http://127.0.0.1:9/v1: using the "
        f"recorded {api.url}" in notes
    )
    assert "max_tokens: recorded 1500, sleuth.toml says 600: using the recorded 1500" in notes
    assert "limits.timeout_s: recorded 7.0, sleuth.toml says 30.0: using the recorded" in notes
    resumed = [e for e in load(path).events if isinstance(e, SessionStarted)][-1]
    assert resumed.brain_options is not None and resumed.brain_options.tool_choice == "required"
    assert resumed.policy["limits"]["timeout_s"] == 7.0


def test_a_flag_given_to_resume_wins_and_is_named(tmp_path: Path, workspace: Path) -> None:
    with ScriptedAPI(script("local"), flavour="openai", models=MODELS) as first:
        path = _crashed_run(tmp_path, workspace, first)
    with ScriptedAPI(script("local")[1:], flavour="openai", models=MODELS) as moved:
        args = ["resume", str(path), "--json", "--config", str(_config(tmp_path, workspace)),
                "--base-url", moved.url, "--max-tokens", "900", "--trust-unsigned"]  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert any(r.path.endswith("/completions") for r in moved.requests)
    assert f"endpoint: recorded {first.url}, --base-url {moved.url}: using {moved.url}" in (
        result.output
    )
    assert "max_tokens: recorded 1500, --max-tokens 900: using 900 (your flag)" in result.output


def test_a_changed_served_context_is_noted_and_the_server_limit_used(
    tmp_path: Path, workspace: Path
) -> None:
    with ScriptedAPI(script("local"), flavour="openai", models=MODELS) as api:
        start = _start(_crashed_run(tmp_path, workspace, api))
    smaller = [{"id": "m", "max_model_len": 4096}]
    with ScriptedAPI([], flavour="openai", models=smaller) as moved:
        brain, notes = rebuild_brain(start, Settings(), BrainOverrides(base_url=moved.url), env={})
    assert isinstance(brain, OpenAIBrain) and brain.context_window == 4096
    assert "served context: recorded 8,192 tokens, the server now serves 4,096" in "\n".join(notes)


def test_a_transcript_from_before_brain_options_uses_todays_environment(
    tmp_path: Path, workspace: Path
) -> None:
    with ScriptedAPI(script("local"), flavour="openai", models=MODELS) as api:
        start = _start(_crashed_run(tmp_path, workspace, api))
        old = start.model_copy(update={"brain_options": None})
        brain, notes = rebuild_brain(old, Settings(), env={"OPENAI_BASE_URL": api.url})
    assert isinstance(brain, OpenAIBrain) and brain.endpoint == api.url and notes == []


def test_recorded_limits_replace_todays_and_name_each_difference() -> None:
    start = SessionStarted(
        session_id="s",
        question="q",
        hosts=[],
        brain="playbook",
        policy={"limits": Limits(timeout_s=5).model_dump()},
        budget={"max_turns": 4},
    )
    today = Settings(limits=Limits(timeout_s=60), brain=BrainSettings())
    today.budget.max_turns = 9
    settings, notes = recorded_limits(start, today)
    assert settings.limits.timeout_s == 5 and settings.budget.max_turns == 4
    assert sorted(n.split(":")[0] for n in notes) == ["budget.max_turns", "limits.timeout_s"]


def test_an_unknown_brain_cannot_be_rebuilt() -> None:
    from sleuth.agent.replay.rebuild import ResumeError

    start: Any = SessionStarted(session_id="s", question="q", hosts=[], brain="mcp")
    with pytest.raises(ResumeError, match="cannot be resumed"):
        rebuild_brain(start, Settings(), env={})
