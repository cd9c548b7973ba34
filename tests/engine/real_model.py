"""The real-model tier's parts: SmolLM2-135M-Instruct served by vLLM's CPU build, and a matrix of
runs of Sleuth's OpenAI-compatible brain against it, tallied from their transcripts.

A 135M model is a fair stand-in for what a small local model does to an agent loop: it calls
tools with invented arguments, babbles, and ends without evidence. The tally counts what
happened; the tests (tests/engine/test_real_model.py) and the benchmark
(benchmarks/real_model.py) hold it to Sleuth's promises: no crash, every transcript verifies,
every status documented, no finding kept as grounded without a grounded quote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import httpx2

from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.session import start_investigation
from sleuth.config import Budget, HostConfig, Settings, ToolChoice
from sleuth.tools.context import build_context
from sleuth.transcripts.events import (
    ErrorEvent,
    FindingEvent,
    ModelTurn,
    SessionEnded,
    SessionStatus,
    ToolExecuted,
)
from sleuth.transcripts.recording import MODEL_OUTPUT
from sleuth.transcripts.store import load
from sleuth.transcripts.verify import verify
from tests.engine.conftest import free_port
from tests.engine.engine_env import EngineEnv

MODEL = "smollm2"
SMALL_CONTEXT = 2048
"""The context the issue's user served: the full prompt (~6k tokens) would not fit."""
STATUSES = set(get_args(SessionStatus))
QUESTIONS = [
    "How many hidden layers does the checkpoint in {root} have?",
    "What is the vocabulary size of the model in {root}?",
    "Does the checkpoint in {root} tie its word embeddings?",
    "Which dtype are the weights in {root} stored in?",
    "What architecture does {root}/config.json declare?",
]


@dataclass(frozen=True)
class RunSpec:
    question: str
    tool_choice: ToolChoice
    temperature: float
    seed: int


def matrix() -> list[RunSpec]:
    """20 runs: each question with `required` and `auto`, greedy and sampled."""
    return [
        RunSpec(q, choice, temperature, seed)
        for i, q in enumerate(QUESTIONS)
        for choice in ("required", "auto")
        for temperature, seed in ((0.0, 0), (0.8, 100 + i))
    ]


@dataclass
class RunTally:
    spec: RunSpec
    status: str = ""
    crash: str = ""
    """A traceback out of the loop: the one outcome that is never allowed."""
    verified: bool = False
    ended: bool = False
    turns: int = 0
    tool_calls: int = 0
    invalid_calls: int = 0
    """Calls answered with an invalid_input error (bad arguments, unknown tool, not JSON)."""
    other_failed_calls: int = 0
    text_calls: int = 0
    """Replies that wrote a call as text (or were cut off mid-call), told that nothing ran."""
    findings: int = 0
    grounded_findings: int = 0
    ungrounded_marked_grounded: int = 0
    """Findings recorded as grounded with a quote that is not: must stay 0."""
    max_prompt_tokens: int = 0
    """The largest prompt the server counted (its usage), against SMALL_CONTEXT."""
    wall_s: float = 0.0
    transcript: str = ""


@dataclass
class Served:
    url: str
    max_model_len: int
    log: Path
    startup_s: float
    proc: subprocess.Popen[bytes] = field(repr=False)


@contextlib.contextmanager
def serve(env: EngineEnv, model: Path, max_model_len: int, log: Path) -> Iterator[Served]:
    """vLLM's OpenAI server for `model`, named smollm2, with hermes tool-call parsing."""
    port = free_port()
    argv = [
        str(env.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--seed",
        "0",
    ]
    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **env.server_env()},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(url, proc, log, deadline=start + 900)
        yield Served(url, max_model_len, log, time.monotonic() - start, proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"vLLM exited with {proc.returncode} before it was ready:\n{tail}")
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(url + "/models", timeout=2).status_code == 200:
                return
        time.sleep(1)
    raise RuntimeError(f"vLLM not ready at {url} in time; its log: {log}")


def run_one(
    spec: RunSpec, url: str, root: Path, transcripts: Path, budget: Budget, max_tokens: int
) -> RunTally:
    """One investigation through the loop API, tallied from its transcript alone."""
    tally = RunTally(spec)
    settings = Settings(hosts={"local": HostConfig(roots=[str(root)])}, budget=budget)
    brain = OpenAIBrain(
        MODEL,
        base_url=url,
        max_tokens=max_tokens,
        temperature=spec.temperature,
        seed=spec.seed,
        tool_choice=spec.tool_choice,
    )
    start = time.monotonic()
    ctx = build_context(settings, [])
    try:
        brain.probe()
        inv = start_investigation(
            spec.question.format(root=root), brain, ctx, settings, transcripts
        )
        tally.transcript = str(inv.writer.path)
        inv.run()
    except Exception:  # the one outcome the tier must never see
        tally.crash = traceback.format_exc()
    finally:
        ctx.close()
        tally.wall_s = time.monotonic() - start
    if tally.transcript:
        read_transcript(tally, Path(tally.transcript))
    return tally


def read_transcript(tally: RunTally, path: Path) -> None:
    report = verify(path)
    tally.verified, tally.ended = report.ok, report.ended
    for event in load(path).events:
        if isinstance(event, ModelTurn):
            tally.turns += 1
            tally.max_prompt_tokens = max(tally.max_prompt_tokens, event.usage.input_tokens)
        elif isinstance(event, ToolExecuted):
            tally.tool_calls += 1
            if event.result.error_kind == "invalid_input":
                tally.invalid_calls += 1
            elif not event.result.ok:
                tally.other_failed_calls += 1
        elif isinstance(event, FindingEvent):
            tally.findings += 1
            finding = event.finding
            if finding.grounded:
                tally.grounded_findings += 1
                if not all(e.grounded for e in finding.evidence) or not finding.evidence:
                    tally.ungrounded_marked_grounded += 1
        elif isinstance(event, ErrorEvent) and event.where == MODEL_OUTPUT:
            tally.text_calls += 1
        elif isinstance(event, SessionEnded):
            tally.status = event.status


def run_matrix(
    specs: list[RunSpec],
    url: str,
    root: Path,
    transcripts: Path,
    *,
    budget: Budget,
    max_tokens: int,
    workers: int = 4,
) -> list[RunTally]:
    """The runs side by side (vLLM batches them; one at a time would idle the server)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(
            pool.map(lambda s: run_one(s, url, root, transcripts, budget, max_tokens), specs)
        )


def summary(tallies: list[RunTally]) -> dict[str, object]:
    return {
        "runs": len(tallies),
        "crashes": sum(bool(t.crash) for t in tallies),
        "verified": sum(t.verified and t.ended for t in tallies),
        "statuses": dict(Counter(t.status for t in tallies)),
        "tool_calls": sum(t.tool_calls for t in tallies),
        "invalid_calls": sum(t.invalid_calls for t in tallies),
        "other_failed_calls": sum(t.other_failed_calls for t in tallies),
        "text_calls": sum(t.text_calls for t in tallies),
        "findings": sum(t.findings for t in tallies),
        "grounded_findings": sum(t.grounded_findings for t in tallies),
        "ungrounded_marked_grounded": sum(t.ungrounded_marked_grounded for t in tallies),
        "turns": sum(t.turns for t in tallies),
        "max_prompt_tokens": max((t.max_prompt_tokens for t in tallies), default=0),
        "wall_s_max": round(max((t.wall_s for t in tallies), default=0.0), 1),
    }
