"""A real language model drives Sleuth: SmolLM2-135M-Instruct, served by vLLM's CPU build with
hermes tool-call parsing in a 2,048-token context (where Sleuth's full prompt would not fit),
through `sleuth ask` and through the loop API.

Whatever the model emits (and a 135M model emits calls with invented arguments, babble and
pseudo-calls), Sleuth must not crash, every transcript must verify, every status must be a
documented one, nothing is kept as grounded that is not, and a run without a grounded finding
ends `unsupported` (exit 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.history import opening_message
from sleuth.agent.protocols import BrainError, Request
from sleuth.agent.session import tool_specs
from sleuth.config import Budget
from tests.engine.engine_env import EngineEnv
from tests.engine.real_model import (
    MODEL,
    SMALL_CONTEXT,
    STATUSES,
    Served,
    matrix,
    run_matrix,
    serve,
    summary,
)

QUESTION = "How many hidden layers does the checkpoint in {root} have?"


@pytest.fixture(scope="module")
def smollm2(engine_env: EngineEnv) -> Path:
    return engine_env.smollm2()


@pytest.fixture(scope="module")
def server(
    engine_env: EngineEnv, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("smollm2") / "vllm.log"
    with serve(engine_env, smollm2, SMALL_CONTEXT, log) as served:
        yield served


def first_request(question: str) -> Request:
    return Request(
        system_prompt(), [opening_message(question, [])], tool_specs(), question=question
    )


def test_twenty_runs_through_the_loop_api_stay_honest(
    server: Served, smollm2: Path, tmp_path: Path
) -> None:
    tallies = run_matrix(
        matrix(),
        server.url,
        smollm2,
        tmp_path / "transcripts",
        budget=Budget(max_turns=4, max_wall_s=600),
        max_tokens=192,
    )
    counts = summary(tallies)
    print(json.dumps(counts))  # shown with -s, and in the failure report
    assert counts["runs"] == 20
    assert [t.crash for t in tallies if t.crash] == []
    assert counts["verified"] == 20
    for t in tallies:
        assert t.status in STATUSES, t
        if t.grounded_findings == 0:
            assert t.status == "unsupported", t
        else:
            assert t.status in ("answered", "budget_exhausted"), t
        assert t.max_prompt_tokens < SMALL_CONTEXT, t  # every request fitted the context
    assert counts["ungrounded_marked_grounded"] == 0
    # `required` makes even this model call tools; each failed call names its kind.
    assert counts["tool_calls"] > 0
    assert counts["invalid_calls"] + counts["other_failed_calls"] <= counts["tool_calls"]


def test_sleuth_ask_with_tool_choice_required_is_unsupported_without_evidence(
    server: Served, smollm2: Path, tmp_path: Path
) -> None:
    (tmp_path / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{smollm2}"]\n')
    env = {**os.environ, "COLUMNS": "200"}
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        env.pop(var, None)
    argv = [sys.executable, "-m", "sleuth.cli", "ask", QUESTION.format(root=smollm2)]
    argv += ["--provider", "openai", "--base-url", server.url, "--model", MODEL]
    argv += ["--tool-choice", "required", "--max-turns", "3", "--json"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert "Traceback" not in done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["status"] in STATUSES
    grounded = [f for f in out["findings"] if f["grounded"]]
    if grounded:
        assert done.returncode in (0, 3) and out["status"] in ("answered", "budget_exhausted")
    else:
        assert (done.returncode, out["status"]) == (3, "unsupported"), done.stderr
        assert out["supported_by_evidence"] is False
    verified = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "verify", out["transcript"]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    # 3: intact but unsigned (the test environment holds no signing key): integrity only.
    assert verified.returncode == 3, verified.stdout + verified.stderr


def test_the_fitted_request_leaves_the_prompt_room_in_the_served_context(
    server: Served, smollm2: Path
) -> None:
    brain = OpenAIBrain(MODEL, base_url=server.url)
    brain.probe()
    assert brain.context_window == SMALL_CONTEXT and brain.compact
    for question in (QUESTION, "Does the checkpoint in {root} tie its word embeddings?"):
        body = brain.fit(first_request(question.format(root=smollm2)))
        # The server's own count of this very prompt (its chat template, its tokenizer).
        counted = httpx2.post(
            server.url.removesuffix("/v1") + "/tokenize",
            json={"model": MODEL, "messages": body["messages"], "tools": body["tools"]},
            timeout=30,
        ).json()["count"]
        assert counted <= brain.prompt_tokens(body)  # the estimate is on the high side
        assert counted + body["max_tokens"] <= SMALL_CONTEXT
        assert body["max_tokens"] >= 256  # and still leaves the model room to answer


def test_an_unfitted_request_shows_the_servers_own_message_and_the_fix(
    server: Served, smollm2: Path
) -> None:
    # No probe: the brain does not know the context, so it asks for its usual 4,096.
    brain = OpenAIBrain(MODEL, base_url=server.url)
    with pytest.raises(BrainError) as caught:
        brain.complete(first_request(QUESTION.format(root=smollm2)))
    said = str(caught.value)
    assert "max_tokens=4096 cannot be greater than max_model_len=2048" in said
    assert "HTTP 400" in said and "--max-tokens" in said and "--max-model-len" in said
