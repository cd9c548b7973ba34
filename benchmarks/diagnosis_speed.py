"""How long the diagnosis of a 50,000-line log takes (issue 42: under 1 s).

    python -m benchmarks.diagnosis_speed [--runs N] [--out FILE]

Each log is 50,000 lines: the serving lines of a real log from tests/fixtures/engine_logs
(SGLang batch and request lines, vLLM V1 throughput lines) repeated, then the real failure
that ended it; and logs of lines the routine filter does not skip (engine INFO/DEBUG lines)
or skips as traceback frames. The median and slowest of `runs` diagnoses are reported per log.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from benchmarks import write_results
from sleuth.tools.serving.diagnose import diagnose
from sleuth.tools.serving.diagnose_lines import split_lines

CORPUS = Path(__file__).parent.parent / "tests" / "fixtures" / "engine_logs"
RESULTS = Path(__file__).parent / "results" / "diagnosis_speed.md"
LINES = 50_000

SGLANG_SERVING = (
    "[2025-06-05 14:56:29 TP0] Decode batch. #running-req: 62, #token: 167777, token usage: "
    "0.81, cuda graph: True, gen throughput (token/s): 896.12, #queue-req: 0\n"
    '[2025-06-05 14:56:29] INFO:     127.0.0.1:40484 - "POST /v1/chat/completions HTTP/1.1" '
    "200 OK\n"
)
VLLM_SERVING = (
    "INFO 06-11 01:50:59 [loggers.py:118] Engine 000: Avg prompt throughput: 1024.3 tokens/s, "
    "Avg generation throughput: 388.1 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV "
    "cache usage: 41.2%, Prefix cache hit rate: 12.0%\n"
    'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
)
CONFIG = (
    "INFO 06-11 01:50:59 [config.py:1234] This model supports multiple tasks: {'generate'}. "
    "Defaulting to 'generate'.\n"
    "(EngineCore_DP0 pid=1) DEBUG 06-11 01:50:59 [shm_broadcast.py:430] No available block "
    "found in 60 second; retrying\n"
)
FRAME = (
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1133, in step\n'
)


def build(filler: str, failure: str) -> list[str]:
    """`filler` repeated, then `failure`, to LINES lines in all."""
    tail = split_lines(failure)
    unit = split_lines(filler.rstrip("\n"))
    body = (unit * (LINES // len(unit) + 1))[: LINES - len(tail)]
    return body + tail


def logs() -> dict[str, list[str]]:
    def real(name: str) -> str:
        return (CORPUS / name).read_bytes().decode()

    return {
        "SGLang serving, then OOM (080)": build(SGLANG_SERVING, real("080-sglang-oom_serving.log")),
        "SGLang serving, then watchdog (081)": build(
            SGLANG_SERVING, real("081-sglang-no_progress.log")
        ),
        "vLLM serving, then illegal access (084)": build(
            VLLM_SERVING, real("084-vllm-illegal_memory_access.log")
        ),
        "vLLM serving, no failure": build(VLLM_SERVING, VLLM_SERVING),
        "50,000 traceback frames, then NCCL timeout (079)": build(
            FRAME, real("079-vllm-nccl_timeout.log")
        ),
        "50,000 non-routine INFO/DEBUG lines, then OOM (087)": build(
            CONFIG, real("087-vllm-oom_serving.log")
        ),
    }


def timed(lines: list[str], runs: int) -> tuple[list[float], list[float], str]:
    """Wall-clock and CPU seconds of each run (CPU time is what the diagnosis itself costs
    on a machine shared with other work), and the kind found."""
    wall, cpu, kind = [], [], ""
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        kind = diagnose(lines).kind
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu, kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = [
        "## Diagnosis of a 50,000-line log (issue 42)",
        "",
        f"Reproduce: `python -m benchmarks.diagnosis_speed --runs {args.runs}`. Goal: under 1 s. "
        f"Measured on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start.",
        "",
        "| log | lines | kind | median wall s | slowest wall s | median CPU s |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for name, lines in logs().items():
        wall, cpu, kind = timed(lines, args.runs)
        rows.append(
            f"| {name} | {len(lines)} | {kind} | {statistics.median(wall):.3f} | "
            f"{max(wall):.3f} | {statistics.median(cpu):.3f} |"
        )
    write_results(args.out, "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
