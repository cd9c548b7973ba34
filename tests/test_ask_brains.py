"""`sleuth ask` as a user runs it, against the scripted model servers on loopback: which brain
answers, what the first status line says, and the exit code of each way a run can end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.scripted_api import ScriptedAPI, message, status, text, tool_use
from tests.test_agent_anthropic import CONFIG, read_config_then_report

KEY = "sk-ant-test-key-0123456789abcdefghij"
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG, indent=2))
    return tmp_path


def ask(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "ask", "Is MTP declared?", *args],
        cwd=project,
        env={**base, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def claude(api: ScriptedAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.url}


def test_an_answer_names_brain_model_and_endpoint_first_and_exits_0(project: Path) -> None:
    with ScriptedAPI(read_config_then_report()) as api:
        done = ask(project, "--model", "claude-haiku-4-5", env=claude(api))
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first == f"brain anthropic · model claude-haiku-4-5 · endpoint {api.url}"
    assert "answered by anthropic" in done.stdout


def test_a_refusal_exits_3_refused_with_no_finding(project: Path) -> None:
    script = [message(text("I won't do that."), stop_reason="refusal")]
    with ScriptedAPI(script) as api:
        done = ask(project, "--json", env=claude(api))
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["status"] == "refused" and out["findings"] == []
    assert verify(project / out["transcript"]).ok


def test_a_text_only_answer_exits_3_unsupported_and_still_shows_the_text(project: Path) -> None:
    with ScriptedAPI([message(text("Yes, one MTP layer."))]) as api:
        as_json = ask(project, "--json", env=claude(api))
    with ScriptedAPI([message(text("Yes, one MTP layer."))]) as api:
        shown = ask(project, env=claude(api))
    out = json.loads(as_json.stdout)
    assert as_json.returncode == 3
    assert out["status"] == "unsupported" and out["supported_by_evidence"] is False
    assert out["answer"] == "Yes, one MTP layer."
    assert shown.returncode == 3
    assert "unsupported by evidence" in shown.stdout
    assert "Yes, one MTP layer." in shown.stdout


def test_thirty_overloads_make_three_requests_then_exit_1_with_the_providers_message(
    project: Path,
) -> None:
    with ScriptedAPI([status(529, retry_after="0")] * 30) as api:
        done = ask(project, env=claude(api))
    assert len(api.requests) == 3
    assert done.returncode == 1
    assert "Overloaded" in done.stdout + done.stderr


def test_a_user_cost_budget_with_an_unpriced_model_is_exit_2_before_any_request(
    project: Path,
) -> None:
    models = [{"id": "smollm2", "max_model_len": 8192}]
    with ScriptedAPI([message(text("hi"))], flavour="openai", models=models) as api:
        done = ask(
            project, "--base-url", api.url, "--model", "smollm2", "--max-cost", "1", "--json"
        )
        (project / "sleuth.toml").write_text("[budget]\nmax_cost_usd = 2.0\n")
        from_file = ask(project, "--base-url", api.url, "--model", "smollm2")
    assert done.returncode == 2 and from_file.returncode == 2
    assert api.requests == []
    assert "'smollm2' has no price" in done.stderr and "[prices." in done.stderr
    assert "$2.00" in from_file.stderr


def test_an_unpriced_model_under_the_default_budget_runs_and_says_cost_is_not_tracked(
    project: Path,
) -> None:
    models = [{"id": "smollm2", "max_model_len": 32768}]
    with ScriptedAPI(read_config_then_report(), flavour="openai", models=models) as api:
        done = ask(project, "--base-url", api.url, "--model", "smollm2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("cost is not tracked for model 'smollm2'") == 1
    assert "cost not tracked" in done.stdout
    transcript = next((project / "transcripts").glob("*.jsonl"))
    assert load(transcript).events[0].policy["price"] is None  # type: ignore[union-attr]


def test_prices_from_flags_keep_a_cost_budget(project: Path) -> None:
    models = [{"id": "smollm2"}]
    with ScriptedAPI(read_config_then_report(), flavour="openai", models=models) as api:
        done = ask(
            project,
            "--base-url",
            api.url,
            "--model",
            "smollm2",
            "--max-cost",
            "1",
            "--price-input",
            "1000",
            "--price-output",
            "1000",
            "--json",
        )
    out = json.loads(done.stdout)
    assert out["cost_tracked"] is True
    assert out["totals"]["cost_usd"] == pytest.approx(0.36)  # 360 tokens at $1000/MTok


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--model", "gpt-5"], {}, "no model provider is configured"),
        (["--model", "gpt-5"], {"ANTHROPIC_API_KEY": KEY}, "Anthropic serves claude-* models"),
        (["--provider", "playbook", "--model", "gpt-5"], {}, "uses no language model"),
        (["--provider", "anthropic"], {}, "ANTHROPIC_API_KEY is not set"),
        (["--provider", "openai", "--model", "gpt-5"], {}, "needs OPENAI_API_KEY"),
    ],
)
def test_a_model_no_configured_provider_serves_is_exit_2(
    project: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    done = ask(project, *args, env=env)
    assert done.returncode == 2, done.stdout
    assert says in " ".join(done.stderr.split())
    assert not (project / "transcripts").exists()


def test_a_model_the_server_does_not_list_is_exit_2(project: Path) -> None:
    models = [{"id": "Qwen/Qwen3-8B", "max_model_len": 32768}]
    with ScriptedAPI([message(text("hi"))], flavour="openai", models=models) as api:
        done = ask(project, "--base-url", api.url, "--model", "gpt-5")
    assert done.returncode == 2
    assert "does not serve model 'gpt-5'; it serves: Qwen/Qwen3-8B" in done.stderr
    assert [r.path for r in api.requests] == ["/v1/models"]


def test_without_a_provider_flag_the_keys_pick_the_brain(project: Path) -> None:
    with ScriptedAPI(read_config_then_report(), flavour="openai") as api:
        openai = ask(project, "--model", "m", env={"OPENAI_BASE_URL": api.url})
    assert openai.returncode == 0, openai.stderr
    assert openai.stderr.startswith(f"brain openai · model m · endpoint {api.url}")
    offline = ask(project, "--json")
    assert json.loads(offline.stdout)["brain"] == "playbook"


def test_a_server_error_shows_the_servers_own_message_and_the_setting_to_change(
    project: Path,
) -> None:
    body = {
        "object": "error",
        "message": "max_tokens=4096 cannot be greater than max_model_len=2048.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    with ScriptedAPI([status(400, body=body)], flavour="openai") as api:
        done = ask(project, "--base-url", api.url, "--model", "smollm2", "--json")
    out: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 1
    assert len(api.requests) == 2  # /v1/models (404 here), then one POST: a 400 is not retried
    assert "HTTP 400): max_tokens=4096 cannot be greater than max_model_len=2048." in out["answer"]
    assert "--max-tokens" in out["answer"] and "--max-model-len" in out["answer"]


def test_a_small_served_context_fits_max_tokens_and_uses_the_compact_prompt(
    project: Path,
) -> None:
    models = [{"id": "smollm2", "max_model_len": 4096}]
    script = [message(tool_use("c1", "read_json", path="config.json")), message(text("done"))]
    with ScriptedAPI(script, flavour="openai", models=models) as api:
        done = ask(
            project, "--base-url", api.url, "--model", "smollm2", "--tool-choice", "required"
        )
    assert done.returncode == 3, done.stderr  # no finding: unsupported
    assert "context 4,096 tokens (compact prompt)" in done.stderr.splitlines()[0]
    first, second = (r.body for r in api.requests[1:])
    size = len(json.dumps(first["messages"])) + len(json.dumps(first["tools"]))
    assert first["max_tokens"] + size / 4 <= 4096  # never more than the prompt leaves
    assert first["messages"][0]["content"].startswith("You are Sleuth.")
    assert len(first["messages"][0]["content"]) < 1000
    assert (first["tool_choice"], second["tool_choice"]) == ("required", "auto")


@pytest.mark.parametrize(
    ("context", "offered"),
    [
        # A question no family claims keeps every read-only tool while they fit...
        (8192, "every read-only tool"),
        # ...and in a 2,048-token context (the smallest one the real-model tier serves),
        # where they would leave no room to answer, only the readers.
        (2048, "the readers"),
    ],
)
def test_a_small_context_offers_only_the_readers_when_the_family_leaves_no_room(
    context: int, offered: str
) -> None:
    from sleuth.agent.brains.fitting import MIN_ROOM
    from sleuth.agent.brains.openai import OpenAIBrain
    from sleuth.agent.brains.prompt import system_prompt
    from sleuth.agent.compact import READERS_ONLY
    from sleuth.agent.findings import REPORT_FINDING
    from sleuth.agent.history import opening_message
    from sleuth.agent.protocols import Request
    from sleuth.agent.session import tool_specs

    question = "Does the checkpoint in /models/x tie its word embeddings?"
    request = Request(
        system_prompt(), [opening_message(question, [])], tool_specs(), question=question
    )
    brain = OpenAIBrain("smollm2", base_url="http://127.0.0.1:9/v1", context_window=context)
    body = brain.fit(request)
    names = {t["function"]["name"] for t in body["tools"]}
    read_only = {t.name for t in tool_specs() if not t.mutating}
    expected = read_only if offered == "every read-only tool" else {*READERS_ONLY, REPORT_FINDING}
    assert names == expected
    room = context - brain.prompt_tokens(body)
    assert MIN_ROOM <= body["max_tokens"] == min(4096, room)


def test_a_server_that_does_not_answer_names_the_url_to_check(project: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    done = ask(project, "--base-url", url, "--model", "smollm2", "--json")
    assert done.returncode == 1, done.stdout
    answer = json.loads(done.stdout)["answer"]
    assert f"POST {url}/chat/completions failed after 3 attempts" in answer
    assert "no HTTP answer came back: check the URL (--base-url" in answer
    assert "overloaded" not in answer


def test_the_servers_count_of_the_last_prompt_fits_the_next_turn(
    project: Path, tmp_path: Path
) -> None:
    # The server counts the first prompt (1,000 tokens, by its own tokenizer); the second
    # request's room is that count plus a high-side estimate of what was added since, not a
    # whole-prompt estimate again.
    from sleuth.agent.brains.fitting import CHARS_PER_TOKEN
    from sleuth.agent.brains.fitting import prompt_chars as _prompt_chars
    from sleuth.agent.brains.openai import OpenAIBrain
    from sleuth.agent.session import start_investigation
    from sleuth.config import HostConfig, Settings
    from sleuth.tools.context import build_context

    models = [{"id": "smollm2", "max_model_len": 4096}]
    script = [
        message(tool_use("c1", "read_json", path="config.json"), input_tokens=1000),
        message(text("done"), input_tokens=1100),
    ]
    settings = Settings(hosts={"local": HostConfig(roots=[str(project)])})
    ctx = build_context(settings, [])
    with ScriptedAPI(script, flavour="openai", models=models) as api:
        brain = OpenAIBrain("smollm2", base_url=api.url)
        brain.probe()
        start_investigation("Is MTP declared?", brain, ctx, settings, tmp_path / "t").run()
    ctx.close()
    first, second = (r.body for r in api.requests[1:])
    added = _prompt_chars(second) - _prompt_chars(first)
    expected_prompt = 1000 + -(-added * 11 // int(CHARS_PER_TOKEN * 10)) + 16
    assert second["max_tokens"] == 4096 - expected_prompt
    whole_prompt_estimate = -(-_prompt_chars(second) * 11 // 30) + 64
    assert second["max_tokens"] > 4096 - whole_prompt_estimate  # more room than before
