"""How many chunks/s one load generator process sustains on one core before it flags itself.

The synthetic server (tests/streaming_server.py) runs in another process, pinned to
another core where there is one, streaming one-token chunks every ITL ms; the load
generator (the program run_benchmark sends) is pinned to core 0. Concurrency rises
until the client reports itself client-limited. Writes a Markdown section:

    python benchmarks/loadgen_throughput.py [--out benchmarks/results/loadgen.md]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_support import synthetic_server  # noqa: E402

from sleuth.tools.bench import program  # noqa: E402
from sleuth.tools.benchmetrics import summarise  # noqa: E402

ITL_MS = 2.0
TOKENS = 1000
LEVELS = (8, 16, 32, 48, 64, 96, 128)


def pin(cpu: int) -> list[str]:
    cpus = os.sched_getaffinity(0)
    return ["taskset", "-c", str(cpu)] if cpu in cpus and len(cpus) > 1 else []


def one_level(url: str, concurrency: int, tmp: Path) -> dict[str, float | bool | str]:
    out = tmp / f"c{concurrency}.jsonl"
    argv = [
        *pin(0),
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
    ]
    subprocess.run(argv, input=program(), check=True, capture_output=True, timeout=300)
    lines = out.read_text().splitlines()
    report = summarise(lines)
    phase = report.phases[0]
    chunks = sum(len(json.loads(line)["chunk_t"]) for line in lines if '"type":"request"' in line)
    return {
        "concurrency": concurrency,
        "offered": concurrency * 1000.0 / ITL_MS,
        "chunks_per_s": chunks / phase.duration_s,
        "cpu_share": phase.client.cpu_share,
        "loop_lag_p99_ms": phase.client.loop_lag.p99 or 0.0,
        "itl_p50_ms": phase.itl_chunk.p50 or 0.0,
        "itl_p99_ms": phase.itl_chunk.p99 or 0.0,
        "limited": phase.client.client_limited,
        "reasons": "; ".join(phase.client.reasons),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/loadgen.md")
    args = ap.parse_args()
    profiles = {"fast": {"ttft_ms": 0, "itl_ms": ITL_MS}}
    rows = []
    server_prefix = pin(1)
    with (
        tempfile.TemporaryDirectory() as tmp,
        synthetic_server(profiles, "--spin-ms", "0", realtime=False, prefix=server_prefix) as url,
    ):
        for level in LEVELS:
            row = one_level(url, level, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
            if row["limited"]:
                break
    write(args.out, rows)


def write(path: Path, rows: list[dict[str, float | bool | str]]) -> None:
    clean = [r for r in rows if not r["limited"]]
    best = max((float(r["chunks_per_s"]) for r in clean), default=0.0)
    lines = [
        "## Load generator throughput (benchmark of the benchmark)",
        "",
        f"`benchmarks/loadgen_throughput.py`, {time.strftime('%Y-%m-%d')}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), shared with other work. "
        f"Client pinned to core 0, synthetic server to core 1; one-token chunks every "
        f"{ITL_MS:g} ms per stream, {TOKENS} per request; no uvloop.",
        "",
        f"**Sustained without flagging itself: {best:,.0f} chunks/s** (target ≥ 20,000).",
        "",
        "| concurrency | offered chunks/s | received chunks/s | client CPU | loop lag p99 ms "
        "| ITL p50 / p99 ms | flagged |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['concurrency']} | {float(r['offered']):,.0f} | "
            f"{float(r['chunks_per_s']):,.0f} | {float(r['cpu_share']):.0%} | "
            f"{float(r['loop_lag_p99_ms']):.1f} | {float(r['itl_p50_ms']):.2f} / "
            f"{float(r['itl_p99_ms']):.2f} | {r['reasons'] or 'no'} |"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
