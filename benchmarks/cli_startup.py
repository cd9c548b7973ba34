"""How long a command takes to start: `sleuth --version` and one `sleuth tool read_lines` on the
local host, against a bare `python -c pass` timed in the same run (issue 33: `--version`
under 0.4 s, importing none of the heavy SDKs).

    python -m benchmarks.cli_startup [--runs 20] [--out benchmarks/results/cli_startup.md]

Each row is a fresh interpreter started `--runs` times after two warm-up runs, in turn with
the other rows so that load on the machine falls on all of them alike; the table gives the
median and p90 wall time and the median's ratio to the bare interpreter.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import write_results

GOAL_S = 0.4


def _rows(folder: Path) -> dict[str, list[str]]:
    (folder / "notes.txt").write_text("one\ntwo\nthree\n")
    (folder / "sleuth.toml").write_text(f'[hosts.local]\nroots = ["{folder}"]\n')
    cli = [sys.executable, "-m", "sleuth.cli"]
    where = ["--transcripts", str(folder / "t"), "--config", str(folder / "sleuth.toml")]
    return {
        "`python -c pass` (the floor)": [sys.executable, "-c", "pass"],
        "`sleuth --version`": [*cli, "--version"],
        "`sleuth tool read_lines` (local, signing off)": [
            *cli,
            "tool",
            "read_lines",
            "path=notes.txt",
            "--no-sign",
            *where,
        ],
    }


def _time(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def measure(runs: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows = _rows(folder)
        for argv in rows.values():  # warm the page cache and the .pyc files
            for _ in range(2):
                _time(argv, folder)
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(runs):
            for name, argv in rows.items():
                times[name].append(_time(argv, folder))
    return times


def report(times: dict[str, list[float]], runs: int) -> str:
    floor = statistics.median(next(iter(times.values())))
    lines = [
        "## Command start-up (`benchmarks/cli_startup.py`)",
        "",
        f"Reproduce: `python -m benchmarks.cli_startup --runs {runs}`. Measured on this "
        f"project's machine ({os.cpu_count()} cores; load average "
        f"{os.getloadavg()[0]:.2f} at the end of the run).",
        "",
        f"Each command started {runs} times in a fresh interpreter, the rows taking turns. "
        f"Goal (issue 33): `sleuth --version` under {GOAL_S} s.",
        "",
        "| command | median s | p90 s | median ÷ floor |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, values in times.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        lines.append(f"| {name} | {median:.3f} | {p90:.3f} | {median / floor:.2f}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/cli_startup.md")
    args = ap.parse_args()
    text = report(measure(args.runs), args.runs)
    write_results(args.out, text)


if __name__ == "__main__":
    main()
