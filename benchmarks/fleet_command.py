"""A fleet command from a fresh process, its phases timed (benchmarks/fleet.py runs it).

`sleuth tool read_json --hosts bench path=models/tiny/config.json --json` is started as a
new process on the fleet `fleet.build` makes, `--runs` times per size, and timed from the
parent's start of the process to its exit, in four phases:

- start-up: the interpreter, the imports, the settings and the hosts chosen;
- opening: every host connected, logged in and its program started (`describe_hosts`, which
  the command calls, timed around in the child: the only instrument; the rest is sleuth's own
  `main`);
- the call: `session_started` to `session_ended`, the transcript's own timestamps;
- exit: closing the hosts and the interpreter's exit.

Every process a host starts over SSH runs the login shell's start-up files first. The sshd
of the main rows reads an empty `~/.bashrc` that only appends a line per session to a log,
so the login shells each host started are counted. A second sshd (`--own-shell-hosts`) runs
the login user's own start-up files, whatever they cost (root's here runs `pyenv init`, and
`python3` is pyenv's shim): the case a fleet command met before it started one process per
host. `--baseline REV` runs the same command from that revision's `sleuth/` too, taking
turns with this tree's, run by run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

GROUP = "bench"
COMMAND = ["tool", "read_json", "--hosts", GROUP, "path=models/tiny/config.json", "--json"]
PHASES = ("total", "start-up", "opening", "call", "exit")
GOAL_HOSTS, GOAL_S = 64, 10.0
LOGIN_FILES_AT_ONCE = 16
COUNTER = 'printf "%s\\n" "$SSH_CONNECTION" >> {log}\n'
"""The empty `~/.bashrc`'s one line: a line per login shell (bash reads it for each command
sshd runs, and for the SFTP subsystem)."""


def child(marks: Path, argv: list[str]) -> None:
    """In the fresh process: sleuth's own main, with `describe_hosts` timed around."""
    baseline = os.environ.get("SLEUTH_BASELINE")
    if baseline:  # that revision's tree before the editable install's
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, baseline)
    import sleuth.agent.session as session
    from sleuth.cli import main

    inner = session.describe_hosts
    opened: dict[str, float] = {}

    def timed(ctx: Any) -> Any:
        opened["start"] = time.time()
        try:
            return inner(ctx)
        finally:
            opened["end"] = time.time()

    session.describe_hosts = timed
    sys.argv = ["sleuth", *argv]
    try:
        main()
    finally:
        marks.write_text(json.dumps(opened))


def baseline_tree(rev: str, into: Path) -> Path:
    """`sleuth/` as it was at `rev`, unpacked under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev, "sleuth"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def run_once(work: Path, tag: str, log: Path | None, baseline: Path | None) -> dict[str, float]:
    """One fresh command on the fleet in `work`: its phases, and the login shells per host."""
    out, marks = work / f"t-{tag}", work / f"marks-{tag}.json"
    env = {**os.environ, "HOME": str(work / "home")}
    env.pop("SLEUTH_BASELINE", None)
    if baseline is not None:
        env["SLEUTH_BASELINE"] = str(baseline)
    if log is not None:
        log.write_text("")
    argv = [sys.executable, "-m", "benchmarks.fleet", "--fresh-child", str(marks), "--"]
    began = time.time()
    ran = subprocess.run(
        [*argv, *COMMAND, "--config", str(work / "sleuth.toml"), "--transcripts", str(out)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    ended = time.time()
    if ran.returncode != 0 or not json.loads(ran.stdout)["ok"]:
        raise SystemExit(f"the fresh command failed ({tag}):\n{ran.stderr[-3000:]}")
    (transcript,) = out.rglob("*.jsonl")
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    ts = {e["type"]: _seconds(e["ts"]) for e in events}
    hosts = len(events[0]["hosts"]) - 1  # `local` is one of them
    opened = json.loads(marks.read_text())
    shells = len(log.read_text().splitlines()) / hosts if log is not None else float("nan")
    return {
        "total": ended - began,
        "start-up": opened["start"] - began,
        "opening": opened["end"] - opened["start"],
        "call": ts["session_ended"] - ts["session_started"],
        "exit": ended - ts["session_ended"],
        "shells": shells,
    }


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def measure(
    work: Path, runs: int, log: Path | None, baseline: Path | None
) -> dict[str, list[dict[str, float]]]:
    """`runs` fresh commands of this tree (and of the baseline, taking turns with it)."""
    sides: dict[str, Path | None] = {"this tree": None}
    if baseline is not None:
        sides["baseline"] = baseline
    found: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for run in range(runs):
        order = list(sides) if run % 2 == 0 else list(reversed(sides))
        for side in order:
            tag = f"{'new' if sides[side] is None else 'base'}-{run}"
            found[side].append(run_once(work, tag, log, sides[side]))
    return found


def rows(count: int, bashrc: str, found: dict[str, list[dict[str, float]]]) -> list[str]:
    lines = []
    for side, runs in found.items():
        median = {k: statistics.median(r[k] for r in runs) for k in (*PHASES, "shells")}
        shells = "-" if median["shells"] != median["shells"] else f"{median['shells']:.0f}"
        lines.append(
            f"| {count} | {bashrc} | {side} | "
            + " | ".join(f"{median[k]:.2f}" for k in PHASES)
            + f" | {shells} |"
        )
    return lines


def login_files_at_once(count: int) -> tuple[float, float]:
    """Seconds for one `source ~/.bashrc` of the login user's own, and for `count` at once:
    what the hosts of one machine, all one user, wait on when they open together."""

    def timed(n: int) -> float:
        began = time.perf_counter()
        shells = [
            subprocess.Popen(
                ["bash", "-c", "source ~/.bashrc"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(n)
        ]
        for shell in shells:
            shell.wait()
        return time.perf_counter() - began

    return timed(1), timed(count)


def report(
    table: list[str],
    goal: list[tuple[str, float]],
    runs: int,
    baseline: str,
    login_files: tuple[float, float] | None,
) -> str:
    against = f", and from `{baseline}`'s `sleuth/` taking turns with it" if baseline else ""
    lines = [
        "### A fleet command from a fresh process",
        "",
        f"`sleuth tool read_json --hosts bench path=models/tiny/config.json --json` started "
        f"{runs} times per row as a new process{against}; medians. Start-up: interpreter, "
        "imports, settings, hosts chosen. Opening: every host connected, logged in and its "
        "program started (`describe_hosts`). Call: `session_started` to `session_ended` (the "
        "transcript's timestamps). Exit: hosts closed, interpreter gone. Login shells: counted "
        "by the empty `~/.bashrc` (a line per session); the login user's own start-up files "
        "(root's here: `pyenv init`, and `python3` is pyenv's shim) cannot be counted.",
        "",
        "What is one host at a time: root's `~/.bashrc` here runs `pyenv init -`, whose "
        "`pyenv rehash` takes one lock file in `~/.pyenv/shims`, so every login shell of the "
        "machine waits for the one before it (the line under the tables). Every alias here is "
        "the one machine and the one user; a real fleet's hosts each have their own. Sleuth's "
        "part is how many login shells a host starts before the first call: one (its program, "
        "which also resolves the roots), where it started three (a timed `true`, an SFTP "
        "session and the program; `sleuth hosts --check` still times the first two).",
        "",
        "| hosts | remote `~/.bashrc` | sleuth | fresh command s | start-up s | opening s "
        "| call s | exit s | login shells per host |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *table,
        "",
        "| target | measured | verdict |",
        "| --- | ---: | ---: |",
    ]
    for what, seconds in goal:
        verdict = "met" if seconds <= GOAL_S else "NOT met"
        lines.append(
            f"| a fresh command over {GOAL_HOSTS} hosts in ≤ {GOAL_S:.0f} s ({what}) | "
            f"{seconds:.2f} s | {verdict} |"
        )
    if login_files is not None:
        one, many = login_files
        lines += [
            "",
            f"The login user's own `~/.bashrc` here, sourced as sshd's bash does: one "
            f"{one:.2f} s, {LOGIN_FILES_AT_ONCE} at once {many:.2f} s.",
        ]
    return "\n".join(lines) + "\n"


def counted_bashrc(home: Path, log: Path) -> Path:
    """The empty `~/.bashrc` of the server's remote home, counting the login shells."""
    (home / ".bashrc").write_text(COUNTER.format(log=log))
    return log
