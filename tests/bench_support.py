"""Helpers for the benchmark tests: a synthetic server process and a load generator run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sleuth.hosts.program import SECRET_RUNNER, program, with_secrets
from sleuth.tools.bench.metrics import parse_lines, summarise
from sleuth.tools.bench.models import BenchReport, ClientLimits, Slo

SERVER = Path(__file__).with_name("streaming_server.py")


def realtime_prefix() -> list[str]:
    """`chrt -f 10` when this machine lets us use it: a shared two-core box otherwise wakes
    our processes late by a millisecond or more, which is the machine's noise, not ours."""
    chrt = shutil.which("chrt")
    if chrt and subprocess.run([chrt, "-f", "10", "true"], capture_output=True).returncode == 0:
        return [chrt, "-f", "10"]
    return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def synthetic_server(
    profiles: dict[str, dict[str, Any]],
    *extra: str,
    realtime: bool = True,
    prefix: Sequence[str] = (),
) -> Iterator[str]:
    port = free_port()
    argv = [
        *prefix,
        *(realtime_prefix() if realtime else []),
        sys.executable,
        str(SERVER),
        "--port",
        str(port),
        "--profiles",
        json.dumps(profiles),
        *extra,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stdout.read().decode() if proc.stdout else "") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


STALL_S = 0.005


def run_loadgen(
    url: str,
    model: str,
    *args: str,
    realtime: bool = True,
    tmp: Path,
    attempts: int = 3,
    stdin_data: dict[str, Any] | None = None,
) -> list[str]:
    """Run the real load generator program, as the tool sends it, and return its lines;
    `stdin_data` (headers, a trace's rows) goes in on stdin as the tool sends it.

    The load generator watches its own event loop. When it saw a stall (this shared
    machine not running it for a few milliseconds), the timings of that run are the
    machine's, not the code's, so the run is repeated, up to `attempts` times.
    """
    head = ["-c", SECRET_RUNNER] if stdin_data is not None else ["-"]
    stdin = with_secrets("loadgen.py", stdin_data) if stdin_data else program("loadgen.py")
    lines: list[str] = []
    for _ in range(attempts):
        out = tmp / f"{model}-{time.monotonic_ns()}.jsonl"
        argv = [
            *(realtime_prefix() if realtime else []),
            sys.executable,
            *head,
            "--url",
            url,
            "--model",
            model,
            "--out",
            str(out),
            *args,
        ]
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        assert done.returncode == 0, done.stderr.decode()
        lines = out.read_text().splitlines()
        if not realtime or not stalled(lines):
            break
    return lines


def stalled(lines: list[str]) -> bool:
    _, phases, _ = parse_lines(lines)
    return any((p.get("loop_lag") or {}).get("max", 0.0) > STALL_S for p in phases)


def bench(
    url: str,
    model: str,
    *args: str,
    tmp: Path,
    slo: Slo | None = None,
    limits: ClientLimits | None = None,
    realtime: bool = True,
) -> BenchReport:
    return summarise(run_loadgen(url, model, *args, tmp=tmp, realtime=realtime), slo, limits)


def train_tokenizer(folder: Path) -> Path:
    """A small byte-level BPE tokenizer trained here, offline, on the load generator's own
    vocabulary plus other text, saved as folder/tokenizer.json like a model's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from sleuth.hosts.program.loadgen import VOCAB

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    # Half the vocabulary seen often enough to become single tokens, the rest split in pieces,
    # so word count and token count differ, as with real models.
    corpus = [" ".join(VOCAB[: len(VOCAB) // 2]) * 3, "The quick brown fox jumps.", "0123456789"]
    tok.train_from_iterator(corpus, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def server_arrivals(url: str) -> list[float]:
    """When each generation request reached the synthetic server (CLOCK_MONOTONIC, the load
    generator's clock too), in arrival order."""
    import urllib.request

    with urllib.request.urlopen(url + "/arrivals", timeout=10) as resp:
        arrivals: list[float] = json.loads(resp.read())
    return arrivals
