"""Launch diagnosis scored on real start-up failure logs (issue 31), and preflight timed on
the corpus failures that were knowable before the launch.

    python -m benchmarks.diagnosis [--corpus DIR] [--out FILE]

A corpus is a folder with one log per file and an index.json listing, per log, its `file`,
`engine`, the `kind` it should get and its `headline` (the cause line, prefixes removed),
as tests/fixtures/engine_logs is laid out; a held-out corpus in the same layout is scored
the same way. A log counts as right (top-1) when the kind is right AND the headline is the
expected line (whitespace aside). A confident-wrong diagnosis has high confidence and the
wrong kind. The report also counts fixes that use a number the index lists for that log.
The default writes benchmarks/results/diagnosis.md, with a second section: each knowable
case rebuilt as tests/test_preflight.py builds it, preflight run on it locally and (cases
that need no GPU) over a throwaway sshd, its kind and its time.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from sleuth.tools.serving.diagnose import diagnose
from sleuth.tools.serving.diagnose_lines import split_lines
from tests.sshd import SSHServer
from tests.test_preflight import CASES, NEEDS_GPU, World, free_port

CORPUS = Path(__file__).parent.parent / "tests" / "fixtures" / "engine_logs"
RESULTS = Path(__file__).parent / "results" / "diagnosis.md"


class Expected(BaseModel):
    """One index.json entry: what the log should be diagnosed as."""

    model_config = ConfigDict(extra="ignore")

    file: str
    engine: str
    kind: str
    headline: str
    numbers: dict[str, float] = {}
    split: str = "rules"
    phase: str | None = None


RUNTIME_KINDS = {
    "oom_serving",
    "illegal_memory_access",
    "nccl_timeout",
    "kv_exhaustion",
    "no_progress",
}
"""Kinds that only a running server shows: a log of one without a stated phase is runtime."""


class Scored(BaseModel):
    file: str
    engine: str
    want: str
    got: str
    confidence: str
    split: str = "rules"
    want_phase: str | None = None
    got_phase: str = "startup"
    kind_right: bool
    headline_right: bool
    fix_uses_numbers: bool | None
    """None when the index lists no numbers for the log."""
    seconds: float

    @property
    def right(self) -> bool:
        return self.kind_right and self.headline_right

    @property
    def confident_wrong(self) -> bool:
        return not self.kind_right and self.confidence == "high"

    @property
    def group(self) -> str:
        """startup, or runtime (warm-up and serving): scored separately."""
        if self.want_phase in ("warm-up", "serving"):
            return "runtime"
        if self.want_phase is None and self.want in RUNTIME_KINDS:
            return "runtime"
        return "startup"


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _uses(fix: str, numbers: dict[str, float]) -> bool | None:
    if not numbers:
        return None
    stated = [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", fix)]
    return any(abs(s - v) <= 0.011 * max(1.0, abs(v)) for v in numbers.values() for s in stated)


def score(corpus: Path) -> list[Scored]:
    """Diagnose every log the corpus indexes and compare with what the index expects."""
    rows = []
    for raw in json.loads((corpus / "index.json").read_text()):
        want = Expected.model_validate(raw)
        text = (corpus / want.file).read_bytes().decode("utf-8", errors="replace")
        start = time.perf_counter()
        got = diagnose(split_lines(text))
        spent = time.perf_counter() - start
        rows.append(
            Scored(
                file=want.file,
                engine=want.engine,
                want=want.kind,
                got=got.kind,
                confidence=got.confidence,
                split=want.split,
                want_phase=want.phase,
                got_phase=got.phase,
                kind_right=got.kind == want.kind,
                headline_right=_same(got.headline, want.headline),
                fix_uses_numbers=_uses(got.fix, want.numbers),
                seconds=spent,
            )
        )
    return rows


def accuracy(rows: list[Scored]) -> float:
    return sum(r.right for r in rows) / len(rows) if rows else 0.0


def report(rows: list[Scored], corpus: Path) -> str:
    by_kind = Counter(r.want for r in rows)
    lines = [
        "## Launch diagnosis on real engine logs (issue 31)",
        "",
        f"Reproduce: `python -m benchmarks.diagnosis` (corpus: `{_shown(corpus)}`, "
        f"{len(rows)} logs: {sum(r.engine == 'vllm' for r in rows)} vLLM, "
        f"{sum(r.engine == 'sglang' for r in rows)} SGLang). Right = kind right and headline "
        "right; confident-wrong = high confidence with the wrong kind.",
        "",
        "| kind | logs | kind right | kind and headline right | low confidence | confident-wrong |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind in sorted(by_kind):
        mine = [r for r in rows if r.want == kind]
        lines.append(
            f"| {kind} | {len(mine)} | {sum(r.kind_right for r in mine)} | "
            f"{sum(r.right for r in mine)} | {sum(r.confidence == 'low' for r in mine)} | "
            f"{sum(r.confident_wrong for r in mine)} |"
        )
    wrong = [r for r in rows if not r.right]
    numbered = [r for r in rows if r.fix_uses_numbers is not None]
    used = sum(bool(r.fix_uses_numbers) for r in numbered)
    slowest = max((r.seconds for r in rows), default=0.0)
    lines += [
        f"| **all** | {len(rows)} | {sum(r.kind_right for r in rows)} | "
        f"{sum(r.right for r in rows)} | {sum(r.confidence == 'low' for r in rows)} | "
        f"{sum(r.confident_wrong for r in rows)} |",
        "",
        f"Top-1 accuracy (kind and headline): **{accuracy(rows):.1%}**; confident-wrong: "
        f"**{sum(r.confident_wrong for r in rows)}**. Fixes that use a number the log states "
        f"(of the logs whose index lists numbers): {used}/{len(numbered)}. Slowest "
        f"diagnosis: {slowest:.3f} s.",
        "",
    ]
    if wrong:
        lines += ["Not right:", ""]
        lines += [
            f"- {r.file}: expected {r.want}, got {r.got} ({r.confidence} confidence)"
            + ("" if r.headline_right else ", headline differs")
            for r in wrong
        ]
        lines.append("")
    return "\n".join(lines)


def preflight_rows(work: Path) -> list[dict[str, Any]]:
    """Each rebuilt knowable case: the kind preflight gives and its time, locally and over
    sshd (where no fake GPU is needed)."""
    server = SSHServer.create(work / "sshd")
    rows = []
    try:
        for log in sorted(CASES):
            root = work / log
            root.mkdir()
            patch = pytest.MonkeyPatch()
            world = World(root, patch, {"engine": "vllm", "port": free_port()})
            CASES[log](world)
            row: dict[str, Any] = {"log": log}
            for where in ("local", "remote"):
                if where == "remote" and log in NEEDS_GPU:
                    continue
                ctx = _context(where, root, server, work)
                start = time.perf_counter()
                result = execute(ctx, "preflight", {"host": where, **world.args})
                row[where] = (result.data["diagnosis"]["kind"], time.perf_counter() - start)
                ctx.close()
            rows.append(row)
            for sock in world.held:
                sock.close()
            patch.undo()
    finally:
        server.stop()
    return rows


def _context(where: str, root: Path, server: SSHServer, work: Path) -> ToolContext:
    config = HostConfig(roots=[str(root)])
    if where == "local":
        return ToolContext(hosts={"local": SandboxedHost("local", LocalHost(), config, Limits())})
    ssh = SSHHost(
        "remote",
        server.alias,
        known_hosts=work / "known_hosts",
        ssh_config_path=server.ssh_config_path,
        user_known_hosts=server.known_hosts_path,
    )
    return ToolContext(hosts={"remote": SandboxedHost("remote", ssh, config, Limits())})


def preflight_report(rows: list[dict[str, Any]], corpus: Path) -> str:
    index = {e["file"]: e for e in json.loads((corpus / "index.json").read_text())}
    knowable = [f for f, e in index.items() if e["knowable_before_launch"]]
    lines = [
        "### Preflight on the knowable cases",
        "",
        f"{len(rows)} of the {len(knowable)} logs marked knowable_before_launch rebuilt as "
        "tests/test_preflight.py builds them (checkpoint, installed engine files, torch's "
        "CUDA build, an nvidia-smi reporting the thread's GPU, a held port), preflight run "
        "locally and, for cases that need no GPU, over a throwaway sshd.",
        "",
        "| log | expected | local | local s | over sshd | sshd s |",
        "|---|---|---|---:|---|---:|",
    ]
    for r in rows:
        want = index[r["log"]]["kind"]
        local, remote = r["local"], r.get("remote")
        lines.append(
            f"| {r['log']} | {want} | {local[0]} | {local[1]:.2f} | "
            + (f"{remote[0]} | {remote[1]:.2f} |" if remote else "(needs a GPU) | |")
        )
    caught = sum(r["local"][0] == index[r["log"]]["kind"] for r in rows)
    local_s = [r["local"][1] for r in rows]
    ssh_s = [r["remote"][1] for r in rows if "remote" in r]
    missing = sorted(set(knowable) - {r["log"] for r in rows})
    lines += [
        "",
        f"Caught with the log's kind: {caught} of {len(rows)} rebuilt, {caught} of "
        f"{len(knowable)} knowable ({caught / len(knowable):.0%}). Local: median "
        f"{statistics.median(local_s):.2f} s, max {max(local_s):.2f} s; over sshd: median "
        f"{statistics.median(ssh_s):.2f} s, max {max(ssh_s):.2f} s (target: under 5 s).",
        "",
        "Not rebuilt: " + ", ".join(m.split("-")[0] for m in missing) + ".",
        "",
    ]
    return "\n".join(lines)


def _shown(corpus: Path) -> str:
    try:
        return str(corpus.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(corpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    text = report(score(args.corpus), args.corpus)
    if args.corpus == CORPUS:
        with tempfile.TemporaryDirectory() as work:
            text += "\n" + preflight_report(preflight_rows(Path(work)), args.corpus)
    out = args.out or (RESULTS if args.corpus == CORPUS else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
