"""How many chunks/s one load generator process sustains on one core before it flags itself.

The synthetic server (tests/streaming_server.py) runs in another process, pinned to
core 1 where there is one, streaming one-token chunks every ITL ms; the load generator
(the program run_benchmark sends) is pinned to core 0 with os.sched_setaffinity.
Concurrency rises until the client reports itself client-limited, once with uvloop
(when it is installed) and once with asyncio's own loop. Each row gives the client's
CPU time (time.process_time) per wall second and per chunk received. Writes a
Markdown section:

    python benchmarks/loadgen_throughput.py [--out benchmarks/results/loadgen.md] [--realtime]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_support import realtime_prefix, synthetic_server  # noqa: E402

from sleuth.tools.bench import program  # noqa: E402
from sleuth.tools.benchmetrics import summarise  # noqa: E402

ITL_MS = 2.0
TOKENS = 1000
LEVELS = (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128)
CLIENT_CPU, SERVER_CPU = 0, 1

Row = dict[str, float | bool | str]


def has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def pinned(cpu: int) -> Any:
    """A preexec_fn pinning the child to `cpu`, when this machine has it and another."""
    cpus = os.sched_getaffinity(0)
    if cpu not in cpus or len(cpus) < 2:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def pin_prefix(cpu: int) -> list[str]:
    cpus = os.sched_getaffinity(0)
    return ["taskset", "-c", str(cpu)] if cpu in cpus and len(cpus) > 1 else []


def one_level(url: str, concurrency: int, tmp: Path, uvloop: bool, realtime: bool) -> Row:
    out = tmp / f"c{concurrency}-{uvloop}.jsonl"
    argv = [
        *(realtime_prefix() if realtime else []),
        sys.executable,
        "-",
        "--url",
        url,
        "--model",
        "fast",
        "--concurrency",
        str(concurrency),
        "--num-prompts",
        str(concurrency),
        "--output-len",
        str(TOKENS),
        "--input-len",
        "16",
        "--out",
        str(out),
        *([] if uvloop else ["--no-uvloop"]),
    ]
    subprocess.run(
        argv,
        input=program(),
        check=True,
        capture_output=True,
        timeout=300,
        preexec_fn=pinned(CLIENT_CPU),
    )
    lines = out.read_text().splitlines()
    report = summarise(lines)
    phase = report.phases[0]
    raw = next(json.loads(line) for line in lines if '"type":"phase"' in line)
    chunks = sum(len(json.loads(line)["chunk_t"]) for line in lines if '"type":"request"' in line)
    return {
        "loop": "uvloop" if uvloop else "asyncio",
        "concurrency": concurrency,
        "offered": concurrency * 1000.0 / ITL_MS,
        "chunks_per_s": chunks / phase.duration_s,
        "cpu_share": phase.client.cpu_share,
        "cpu_us_per_chunk": raw["cpu_s"] / max(chunks, 1) * 1e6,
        "loop_lag_p99_ms": phase.client.loop_lag.p99 or 0.0,
        "itl_p50_ms": phase.itl_chunk.p50 or 0.0,
        "itl_p99_ms": phase.itl_chunk.p99 or 0.0,
        "limited": phase.client.client_limited,
        "reasons": "; ".join(phase.client.reasons),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/loadgen.md")
    ap.add_argument(
        "--realtime",
        action="store_true",
        help="run the client under chrt -f 10, so other work on a shared box cannot preempt it",
    )
    args = ap.parse_args()
    profiles = {"fast": {"ttft_ms": 0, "itl_ms": ITL_MS}}
    rows: list[Row] = []
    loops = [True, False] if has_uvloop() else [False]
    with (
        tempfile.TemporaryDirectory() as tmp,
        synthetic_server(
            profiles, "--spin-ms", "0", realtime=False, prefix=pin_prefix(SERVER_CPU)
        ) as url,
    ):
        for uvloop in loops:
            for level in LEVELS:
                row = one_level(url, level, Path(tmp), uvloop, args.realtime)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if row["limited"]:
                    break
    write(args.out, rows, args.realtime)


def best(rows: list[Row], loop: str) -> float:
    clean = [r for r in rows if r["loop"] == loop and not r["limited"]]
    return max((float(r["chunks_per_s"]) for r in clean), default=0.0)


def write(path: Path, rows: list[Row], realtime: bool) -> None:
    loops = list(dict.fromkeys(str(r["loop"]) for r in rows))
    headline = ", ".join(f"{best(rows, loop):,.0f} chunks/s with {loop}" for loop in loops)
    lines = [
        "## Load generator throughput (benchmark of the benchmark)",
        "",
        f"`python benchmarks/loadgen_throughput.py{' --realtime' if realtime else ''}`, "
        f"{time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), shared with "
        f"other work. Client pinned to core {CLIENT_CPU} (os.sched_setaffinity)"
        f"{', under chrt -f 10' if realtime else ''}, synthetic server to core {SERVER_CPU}; "
        f"one-token chunks every {ITL_MS:g} ms per stream, {TOKENS} per request. Client CPU is "
        "time.process_time over the phase's wall time; CPU/chunk is that time over chunks "
        "received (the client's whole cost per chunk: aiohttp, the loop, our parsing).",
        "",
        f"**Sustained without flagging itself: {headline}** (target ≥ 20,000).",
        "",
        "| loop | concurrency | offered chunks/s | received chunks/s | client CPU | CPU µs/chunk "
        "| loop lag p99 ms | ITL p50 / p99 ms | flagged |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['loop']} | {r['concurrency']} | {float(r['offered']):,.0f} | "
            f"{float(r['chunks_per_s']):,.0f} | {float(r['cpu_share']):.0%} | "
            f"{float(r['cpu_us_per_chunk']):.1f} | "
            f"{float(r['loop_lag_p99_ms']):.1f} | {float(r['itl_p50_ms']):.2f} / "
            f"{float(r['itl_p99_ms']):.2f} | {r['reasons'] or 'no'} |"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
