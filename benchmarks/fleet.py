"""Fleet calls at scale: one read-only tool on 16, 64 and 256 hosts at once, and a fleet
command from a fresh process (`fleet_command.py`).

    python -m benchmarks.fleet [--hosts 16 64 256] [--calls 5] [--concurrency 64]
                               [--runs 3] [--own-shell-hosts 16 64] [--baseline REV]
                               [--out benchmarks/results/fleet.md]

The fleet is one throwaway sshd on 127.0.0.1 (tests/sshd.py) and N aliases to it in a
generated ~/.ssh/config, each host with its own root tree (`hosts/hNNN`, a small checkpoint
folder). Why one sshd and not N: each alias is still its own TCP connection, key exchange,
authentication and session, which is what a fleet call pays per host, and sshd forks a
process per connection either way; N listeners would only add N processes and host keys to
a 2-core machine without changing what is measured. The figures are therefore a floor for
the client (Sleuth), with every host's work done by the same two cores.

Each N runs in a child process of its own, so its peak RSS is its own. The child builds the
run's context for the group (`--hosts bench`), connects to every host once
(`describe_hosts`, the once-per-run startup: connect, authenticate, resolve the roots), then
makes `--calls` fleet calls of `python_env` (a Python program started on every host) and of
`list_dir` (a `find`), each through the call pipeline into a real transcript, fsynced per
event. Reported: the startup, each fleet call's wall time (p50, p95), each host's own call
inside it (p50, p95), peak RSS and the transcript's size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import fleet_command, write_results
from tests.sshd import SSHServer, missing_reason

GROUP = "bench"
TOOLS = {"python_env": {}, "list_dir": {"path": "models", "depth": 3}}
GOAL_S = 30.0


def build(work: Path, server: SSHServer, count: int) -> Path:
    """N hosts: aliases to the one sshd, a root tree each, a sleuth.toml naming them."""
    ssh = work / "home" / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    shutil.copy(server.known_hosts_path, ssh / "known_hosts")
    names = [f"h{i:03d}" for i in range(1, count + 1)]
    (ssh / "config").write_text(
        f"Host {' '.join(names)}\n    HostName {server.host}\n    Port {server.port}\n"
        f"    User {server.user}\n    IdentityFile {server.client_key_path}\n"
        "    IdentitiesOnly yes\n"
    )
    toml = [f'known_hosts = "{work}/sleuth_known_hosts"', "", "[groups]", f'{GROUP} = ["h*"]']
    for name in names:
        root = work / "hosts" / name
        model = root / "models" / "tiny"
        model.mkdir(parents=True)
        (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}\n')
        (model / "model.safetensors").write_bytes(b"\0" * 4096)
        toml += ["", f"[hosts.{name}]", f'ssh = "{name}"', f'roots = ["{root}"]']
    (work / "sleuth.toml").write_text("\n".join(toml) + "\n")
    return work


def child(work: Path, calls: int, concurrency: int) -> dict[str, Any]:
    """One fleet size, measured in this process."""
    from sleuth.agent.calls import Call, CallPipeline
    from sleuth.agent.fleet.view import FleetView
    from sleuth.agent.session import describe_hosts, host_groups, new_session_id
    from sleuth.config import load_settings
    from sleuth.hosts.groups import select_hosts
    from sleuth.tools.context import build_context
    from sleuth.transcripts.events import Event, SessionStarted, ToolExecuted
    from sleuth.transcripts.fleet import FleetResult
    from sleuth.transcripts.store import TranscriptWriter

    settings = load_settings(work / "sleuth.toml", cwd=work)
    settings.fleet.concurrency = concurrency
    chosen = select_hosts(settings, specs=[GROUP])
    ctx = build_context(chosen.settings, chosen.names, groups=chosen.groups)
    rss_before = _rss_mib()
    began = time.perf_counter()
    hosts = describe_hosts(ctx)
    startup = time.perf_counter() - began
    unreachable = [h.name for h in hosts if h.address.startswith("unreachable")]
    writer = TranscriptWriter.create(work / "transcripts", new_session_id())
    start = SessionStarted(
        session_id="bench", question="fleet", hosts=hosts, brain="bench", groups=host_groups(ctx)
    )
    writer.append(start)
    per_host: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    walls: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    agreed: dict[str, int] = {}

    def record(event: Event) -> None:
        writer.append(event)
        if isinstance(event, ToolExecuted) and event.fleet is not None:
            per_host[event.tool].append(event.result.duration_s)

    pipeline = CallPipeline(ctx, record, fleet=FleetView.of(start))
    try:
        for i in range(calls):
            for tool, extra in TOOLS.items():
                began = time.perf_counter()
                result = pipeline.tool(Call(f"{tool}-{i}", tool, {"host": f"@{GROUP}", **extra}), i)
                walls[tool].append(time.perf_counter() - began)
                fleet = FleetResult.model_validate(result.data)
                agreed[tool] = len(fleet.hosts_of("all agree"))
    finally:
        ctx.close()
        writer.close()
    return {
        "hosts": len(chosen.names),
        "unreachable": unreachable,
        "startup_s": startup,
        "walls": walls,
        "per_host": per_host,
        "agreed": agreed,
        "rss_before_mib": rss_before,
        "peak_rss_mib": _rss_mib(),
        "transcript_bytes": writer.path.stat().st_size,
    }


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_size(server: SSHServer, base: Path, count: int, calls: int, concurrency: int) -> Any:
    work = build(base / f"n{count}", server, count)
    env = {**os.environ, "HOME": str(work / "home")}
    ran = subprocess.run(
        [sys.executable, "-m", "benchmarks.fleet", "--child", str(work), "--calls", str(calls),
         "--concurrency", str(concurrency)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if ran.returncode != 0:
        raise SystemExit(f"the {count}-host run failed:\n{ran.stderr}")
    return json.loads(ran.stdout.splitlines()[-1])


def report(rows: list[Any], calls: int, concurrency: int) -> str:
    lines = [
        "## Fleet calls (`benchmarks/fleet.py`)",
        "",
        f"Reproduce: `python -m benchmarks.fleet --calls {calls} --concurrency {concurrency}` "
        "(starts its own sshd on 127.0.0.1).",
        "",
        'One read-only tool on every host of a group (`host="@bench"`), through the call '
        "pipeline into a fsynced transcript. One sshd, N aliases in a generated ssh_config "
        "(each its own connection and session), each host with its own root tree; client and "
        f"every host share this machine's 2 cores. Concurrency {concurrency}. Startup = "
        "connecting to every host once (`describe_hosts`); each call after it reuses the "
        f"connections. Fleet call = the whole group answered and grouped, over {calls} calls; "
        "per host = each host's own call inside them.",
        "",
        "| hosts | tool | startup s | fleet call p50 s | fleet call p95 s | per host p50 ms "
        "| per host p95 ms | hosts agreeing | peak RSS MiB | transcript MiB |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        for tool in TOOLS:
            walls, hosts = row["walls"][tool], row["per_host"][tool]
            lines.append(
                f"| {row['hosts']} | {tool} | {row['startup_s']:.2f} | "
                f"{statistics.median(walls):.2f} | {pct(walls, 0.95):.2f} | "
                f"{statistics.median(hosts) * 1000:.0f} | {pct(hosts, 0.95) * 1000:.0f} | "
                f"{row['agreed'][tool]} | {row['peak_rss_mib']:.0f} | "
                f"{row['transcript_bytes'] / 2**20:.2f} |"
            )
    biggest = max(rows, key=lambda r: r["hosts"])
    worst = max(pct(biggest["walls"][t], 0.95) for t in TOOLS)
    verdict = "met" if worst <= GOAL_S else "NOT met"
    lines += [
        "",
        "| target | measured | verdict |",
        "| --- | ---: | ---: |",
        f"| {biggest['hosts']} hosts answer a read-only tool in ≤ {GOAL_S:.0f} s at p95 | "
        f"{worst:.2f} s | {verdict} |",
        "",
        "Peak RSS is the whole client process (Python, paramiko, one transport and thread per "
        "host); each host's raw output goes to the transcript as it arrives and only one copy "
        "of each distinct (masked) answer is kept for the grouped result.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    if sys.argv[1:2] == ["--fresh-child"]:  # the fresh command itself, in its own process
        fleet_command.child(Path(sys.argv[2]), sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--calls", type=int, default=5, help="0: the fresh command only")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3, help="fresh commands per row")
    parser.add_argument("--own-shell-hosts", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--baseline", help="a git revision whose sleuth/ also runs the command")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fleet.md"))
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.calls, args.concurrency)))
        return
    if reason := missing_reason():
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="sleuth-fleet-") as tmp:
        base = Path(tmp)
        baseline = None
        if args.baseline:
            baseline = fleet_command.baseline_tree(args.baseline, base / "baseline")
        rows, fresh = _measure(args, base, baseline)
    text = report(rows, args.calls, args.concurrency) if rows else ""
    table, goal = fresh
    login_files = None
    if args.own_shell_hosts:
        login_files = fleet_command.login_files_at_once(fleet_command.LOGIN_FILES_AT_ONCE)
    fresh_text = fleet_command.report(table, goal, args.runs, args.baseline, login_files)
    text += ("\n" if text else "") + fresh_text
    write_results(args.out, text)


def _measure(
    args: argparse.Namespace, base: Path, baseline: Path | None
) -> tuple[list[Any], tuple[list[str], list[tuple[str, float]]]]:
    rows: list[Any] = []
    table: list[str] = []
    goal: list[tuple[str, float]] = []
    kinds = [("empty", True, args.hosts), ("the login user's own", False, args.own_shell_hosts)]
    for bashrc, clean, sizes in kinds:
        if not sizes:
            continue
        with SSHServer.create(base / f"sshd-{clean}", clean_shell=clean) as server:
            log = fleet_command.counted_bashrc(server.home, base / "shells.log") if clean else None
            for count in sizes:
                if clean and args.calls:
                    rows.append(run_size(server, base, count, args.calls, args.concurrency))
                    _said(rows[-1])
                work = build(base / f"fresh-{clean}-{count}", server, count)
                found = fleet_command.measure(work, args.runs, log, baseline)
                table += fleet_command.rows(count, bashrc, found)
                print(table[-1], flush=True)
                if count == fleet_command.GOAL_HOSTS:
                    total = statistics.median(r["total"] for r in found["this tree"])
                    goal.append((f"`~/.bashrc`: {bashrc}", total))
    return rows, (table, goal)


def _said(row: Any) -> None:
    print(
        f"{row['hosts']} hosts: startup {row['startup_s']:.2f} s, python_env p95 "
        f"{pct(row['walls']['python_env'], 0.95):.2f} s, peak RSS "
        f"{row['peak_rss_mib']:.0f} MiB",
        flush=True,
    )


if __name__ == "__main__":
    main()
