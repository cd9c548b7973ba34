"""The offline investigator: no language model, a fixed plan per question family.

`PlaybookBrain` routes a question to a family by its words and the targets it
names, then drives the same registered tools through the same loop, policy and
transcript as any other brain, and reports grounded findings whose quotes are
lines copied from the tool output. It is stateless: each turn re-runs the
family's plan against the results recorded so far, so a resumed run picks up
where it stopped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.protocols import BrainReply, Request
from sleuth.transcripts.events import ContentBlock, ModelResponse


@dataclass
class Result:
    """One tool call's outcome as the playbook sees it."""

    call_id: str
    output: str
    is_error: bool
    data: Any = None

    def line(self, *needles: str) -> str | None:
        """The first output line containing every needle (case-insensitive), for quoting."""
        for raw in self.output.splitlines():
            low = raw.lower()
            if all(n.lower() in low for n in needles) and raw.strip():
                return raw.strip()
        return None


@dataclass
class Call:
    tool: str
    input: dict[str, Any]


@dataclass
class Report:
    claim: str
    verdict: str
    confidence: float
    evidence: list[tuple[Result, str | None]]
    next_steps: list[str] = field(default_factory=list)


Step = Sequence[Call | Report]
Plan = Generator[Step, list[Result], str]


@dataclass
class Question:
    text: str
    hosts: dict[str, list[str]]
    """Host name -> roots, as the opening message lists them."""

    @property
    def host(self) -> str:
        remote = [h for h in self.hosts if h != "local"]
        return remote[0] if remote else "local"

    @property
    def paths(self) -> list[str]:
        """Absolute paths and relative ones with a folder part (models/X), as the question names
        them; relative ones are taken from the host's first root."""
        found = []
        for raw in re.findall(r"(?<![\w/])((?:/|\.{1,2}/|[\w.-]{2,}/)[^\s'\"`]*)", self.text):
            path = raw.rstrip(".,;:?!)'\"")
            if path.lower() in ("tok/s", "req/s", "tokens/s") or path.endswith("/s"):
                continue
            if not path.startswith("/"):
                path = f"{self.hosts.get(self.host, ['.'])[0].rstrip('/')}/{path}"
            found.append(path)
        return found

    def has(self, *words: str) -> bool:
        """Whether the question says any of `words`, not counting names of models or paths
        (so "DeepSeek-V3-FP8" does not make a question about FP8)."""
        low = " ".join(
            t
            for t in self.text.lower().split()
            if not (re.search(r"\d", t) and re.search(r"[-/]", t))
        )
        return any(re.search(rf"(?<![a-z0-9]){re.escape(w)}", low) for w in words)


FAMILIES: dict[str, tuple[str, ...]] = {
    "serve": (
        "serve",
        "serving",
        "gain",
        "launch",
        "benchmark",
        "throughput",
        "tok/s",
        "tokens per second",
        "latency",
        "ttft",
    ),
    "capacity": (
        "fit",
        "kv cache",
        "kv-cache",
        "how much context",
        "how long a context",
        "context length",
        "out of memory",
        "oom",
        "enough memory",
        "how many tokens",
        "concurrent requests",
    ),
    "engine": ("flag", "support", "backend", "which option", "turns on", "enable", "kernel"),
    "mtp": ("mtp", "nextn", "multi-token", "multi token", "draft head", "mtp head"),
    "quant": (
        "quantis",
        "quantiz",
        "nvfp4",
        "fp8",
        "fp4",
        "awq",
        "gptq",
        "int4",
        "precision",
        "dtype",
    ),
    "arch": (
        "architecture",
        "layers",
        "experts",
        "parameters",
        "params",
        "hidden size",
        "how big",
        "attention",
    ),
    "env": ("installed", "version", "gpu", "gpus", "nvidia", "cuda", "environment", "python"),
}

FAMILY_HELP = {
    "mtp": "MTP heads: does a checkpoint declare and carry its multi-token-prediction heads?",
    "quant": "quantisation: method, algorithm, excluded modules and dtypes of a checkpoint",
    "arch": "architecture: layers, experts, attention types and parameter count",
    "engine": "engine support: where an engine's source mentions a feature or flag",
    "env": "environment: installed sglang/vllm/torch/transformers/flashinfer and GPUs",
    "serve": "serve and benchmark: launch a server, benchmark it, stop it (needs permission); "
    "with speculative decoding named, the same load without and with it, compared",
    "capacity": "capacity: will a checkpoint fit on N GPUs at a tp and context, and how much KV",
}


def route(q: Question) -> str | None:
    """The family a question belongs to; words that name a subject outrank general ones."""
    if q.has(*FAMILIES["serve"]):
        return "serve"
    if q.has(*FAMILIES["capacity"]):
        return "capacity"
    if q.has(*FAMILIES["engine"]) and (q.has("sglang", "vllm", "engine") or _feature_word(q)):
        return "engine"
    for family in ("mtp", "quant", "arch", "env"):
        if q.has(*FAMILIES[family]):
            return family
    return None


class PlaybookBrain:
    """A brain with no language model, for offline use and `sleuth demo`."""

    name = "playbook"
    model: str | None = None

    def complete(self, request: Request) -> BrainReply:
        question, turns = _read_conversation(request)
        family = route(question)
        plan = PLANS[family](question) if family else _unroutable(question)
        try:
            step: Step | str = next(plan)
            for results in turns:
                step = plan.send(results)
        except StopIteration as done:
            step = str(done.value)
        if request.final and not isinstance(step, str) and step and isinstance(step[0], Call):
            step = "The budget ran out before the plan finished."
        return BrainReply(response=_response(step, len(turns)))


def _response(step: Step | str, turn: int) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(content=[ContentBlock(type="text", text=step)], stop_reason="end_turn")
    blocks = [ContentBlock(type="text", text=f"Playbook step {turn + 1}.")]
    for i, item in enumerate(step):
        call_id = f"pb_{turn + 1}_{i + 1}"
        if isinstance(item, Call):
            blocks.append(
                ContentBlock(type="tool_use", id=call_id, name=item.tool, input=item.input)
            )
        else:
            evidence = [
                {"call_id": r.call_id, "quote": quote} for r, quote in item.evidence if quote
            ]
            blocks.append(
                ContentBlock(
                    type="tool_use",
                    id=call_id,
                    name=REPORT_FINDING,
                    input={
                        "claim": item.claim,
                        "verdict": item.verdict,
                        "confidence": item.confidence,
                        "evidence": evidence
                        or [
                            {"call_id": item.evidence[0][0].call_id, "quote": "(no line to quote)"}
                        ],
                        "next_steps": item.next_steps,
                    },
                )
            )
    return ModelResponse(content=blocks, stop_reason="tool_use")


def _read_conversation(request: Request) -> tuple[Question, list[list[Result]]]:
    """The question and hosts as the request gives them; every earlier turn's results."""
    hosts = {h.name: list(h.roots) or ["."] for h in request.hosts}
    turns: list[list[Result]] = []
    for message in request.messages[1:]:
        if message["role"] != "user":
            continue
        results = [
            Result(
                b["tool_use_id"],
                _text(b.get("content")),
                bool(b.get("is_error")),
                request.tool_data.get(b["tool_use_id"]),
            )
            for b in message["content"]
            if b.get("type") == "tool_result"
        ]
        if results:
            turns.append(results)
    return Question(request.question, hosts), turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


# ---- the plans ---------------------------------------------------------------------------


def _model_dirs(q: Question) -> Generator[Step, list[Result], list[str]]:
    """Checkpoint folders: named in the question, else found under the host's roots."""
    dirs = [
        p
        for p in q.paths
        if not p.endswith((".json", ".safetensors", ".py")) and not _is_engine_path(p)
    ]
    if dirs:
        return dirs
    roots = q.hosts.get(q.host, ["."])
    (found,) = yield [
        Call("list_dir", {"host": q.host, "path": roots[0], "depth": 4, "max_entries": 5000})
    ]
    entries = (found.data or {}).get("entries", []) if not found.is_error else []
    base = (found.data or {}).get("path", roots[0])
    dirs = sorted(
        f"{base}/{e['name'][: -len('/config.json')]}"
        for e in entries
        if e["name"].endswith("/config.json")
    )
    named = [d for d in dirs if d.rsplit("/", 1)[-1].lower() in q.text.lower()]
    return (named or dirs)[:4]


def _summaries(q: Question) -> Generator[Step, list[Result], list[Result]]:
    dirs = yield from _model_dirs(q)
    if not dirs:
        return []
    return (yield [Call("checkpoint_summary", {"host": q.host, "model_dir": d}) for d in dirs])


def _no_checkpoint(q: Question) -> str:
    return (
        f"No checkpoint (a folder with config.json) was found under the roots of host "
        f"{q.host!r}. Name the model folder in the question, e.g. /models/MyModel."
    )


def plan_mtp(q: Question) -> Plan:
    summaries = yield from _summaries(q)
    if not summaries:
        return _no_checkpoint(q)
    reports = [_mtp_report(s) for s in summaries]
    env_results = yield [Call("python_env", {"host": q.host})]
    engine = _engine_dir(env_results[0], q)
    if engine:
        (grep,) = yield [
            Call(
                "grep",
                {
                    "host": q.host,
                    "path": engine,
                    "include_glob": "*.py",
                    "pattern": r"class \w*(MTP|NextN)\w*|speculative.algorithm",
                    "max_matches": 20,
                },
            )
        ]
        reports = [
            *reports,
            _engine_report(grep, engine, "MTP model classes and speculative flags"),
        ]
    yield reports
    return _summary_text(reports)


def _mtp_report(s: Result) -> Report:
    if s.is_error:
        return Report(
            f"The checkpoint could not be read: {s.output.strip()[:200]}",
            "unknown",
            0.3,
            [(s, s.line("error"))],
        )
    mtp = (s.data or {}).get("mtp") or {}
    name = (s.data or {}).get("model_dir", "the checkpoint")
    declared, tensors = mtp.get("declared_layers"), int(mtp.get("tensors") or 0)
    warning = s.line("warning", "mtp")
    evidence = [(s, s.line("mtp:")), (s, warning)]
    if declared and tensors:
        return Report(
            f"{name} declares {declared} MTP layer(s) and carries {tensors} MTP "
            "tensors: the MTP heads survived.",
            "yes",
            0.9,
            evidence,
        )
    if declared and not tensors:
        return Report(
            f"{name} declares {declared} MTP layer(s) in config.json, but its weights "
            "hold no MTP tensors: the heads were stripped, so speculative decoding "
            "with NEXTN/MTP cannot load them.",
            "no",
            0.9,
            evidence,
            ["Re-export the checkpoint keeping the MTP layers, or serve without MTP."],
        )
    if tensors:
        return Report(
            f"{name} carries {tensors} MTP tensors that config.json does not declare.",
            "partial",
            0.7,
            evidence,
        )
    return Report(f"{name} neither declares nor carries MTP heads.", "no", 0.8, evidence)


def plan_quant(q: Question) -> Plan:
    summaries = yield from _summaries(q)
    if not summaries:
        return _no_checkpoint(q)
    reports = []
    for s in summaries:
        quant = (s.data or {}).get("quantization") or {}
        name = (s.data or {}).get("model_dir", "the checkpoint")
        method = quant.get("algorithm") or quant.get("method")
        evidence = [(s, s.line("quantization:")), (s, s.line("tensors:", "dtypes"))]
        dtypes = ", ".join(f"{k}×{v}" for k, v in ((s.data or {}).get("dtypes") or {}).items())
        if method:
            excluded = [i["pattern"] if isinstance(i, dict) else i for i in quant.get("ignore", [])]
            reports.append(
                Report(
                    f"{name} is quantised with {method}"
                    + (f", group size {quant['group_size']}" if quant.get("group_size") else "")
                    + (f"; excluded: {', '.join(map(str, excluded[:8]))}" if excluded else "")
                    + (f"; tensors by dtype: {dtypes}" if dtypes else ""),
                    "yes",
                    0.85,
                    evidence,
                )
            )
        else:
            reports.append(Report(f"{name} declares no quantisation.", "no", 0.7, evidence))
    yield reports
    return _summary_text(reports)


def plan_arch(q: Question) -> Plan:
    summaries = yield from _summaries(q)
    if not summaries:
        return _no_checkpoint(q)
    reports = []
    for s in summaries:
        cfg = (s.data or {}).get("config") or {}
        name = (s.data or {}).get("model_dir", "the checkpoint")
        params = ((s.data or {}).get("params") or {}).get("logical")
        parts = [
            f"{k.replace('_', ' ')} {cfg[k]}"
            for k in (
                "architectures",
                "num_hidden_layers",
                "hidden_size",
                "num_experts",
                "num_experts_per_tok",
            )
            if cfg.get(k)
        ]
        if params:
            parts.append(f"{params:,} parameters counted from the headers")
        reports.append(
            Report(
                f"{name}: " + "; ".join(map(str, parts)),
                "yes",
                0.85,
                [(s, s.line("config:")), (s, s.line("params:"))],
            )
        )
    yield reports
    return _summary_text(reports)


def plan_env(q: Question) -> Plan:
    env, gpus = yield [Call("python_env", {"host": q.host}), Call("gpu_info", {"host": q.host})]
    installed = [p for p in (env.data or {}).get("packages", []) if p.get("installed")]
    names = ", ".join(f"{p['name']} {p.get('version') or '?'}" for p in installed)
    reports = [
        Report(
            f"Installed on {q.host}: {names}"
            if installed
            else f"None of sglang, vllm, torch, transformers or flashinfer is on {q.host}.",
            "yes" if installed else "no",
            0.9,
            [
                (env, env.line(installed[0]["name"]) if installed else env.line("not installed")),
                (env, env.line("python")),
            ],
        ),
        Report(
            gpus.output.splitlines()[0] if gpus.output else "GPU state unknown",
            "yes" if (gpus.data or {}).get("gpus") else "no",
            0.9,
            [(gpus, gpus.line("gpu"))],
        ),
    ]
    yield reports
    return _summary_text(reports)


def _feature_word(q: Question) -> str | None:
    quoted = re.findall(r"[\"'`]([^\"'`]{2,40})[\"'`]", q.text)
    if quoted:
        return str(quoted[0])
    flags = re.findall(r"--[a-z0-9][a-z0-9-]+", q.text)
    if flags:
        return str(flags[0])
    known = re.findall(
        r"\b(nvfp4|nextn|eagle3?|mtp|fp8|fp4|awq|gptq|cutlass|flashinfer|triton|"
        r"deepgemm|deep_gemm|marlin|trtllm|cudnn)\b",
        q.text,
        re.I,
    )
    return str(known[0]) if known else None


def _is_engine_path(path: str) -> bool:
    return any(
        part in ("sglang", "vllm") or part.startswith(("sglang-", "vllm-"))
        for part in path.lower().split("/")
    )


def _engine_dir(env: Result, q: Question) -> str | None:
    named = [p for p in q.paths if _is_engine_path(p)]
    if named:
        return named[0]
    prefer = "vllm" if q.has("vllm") else "sglang"
    packages = [
        p
        for p in (env.data or {}).get("packages", [])
        if p.get("installed") and p.get("inside_roots") and p["name"] in ("sglang", "vllm")
    ]
    packages.sort(key=lambda p: p["name"] != prefer)
    return packages[0]["path"] if packages else None


def plan_engine(q: Question) -> Plan:
    word = _feature_word(q) or "speculative"
    (env,) = yield [Call("python_env", {"host": q.host})]
    engine = _engine_dir(env, q)
    if engine is None:
        report = Report(
            f"No SGLang or vLLM source is readable on {q.host}: not installed, or "
            "installed outside the host's roots.",
            "unknown",
            0.6,
            [(env, env.line("sglang")), (env, env.line("vllm"))],
            [
                "Name the engine's source folder in the question, or add its install "
                "path to the host's roots in sleuth.toml."
            ],
        )
        yield [report]
        return _summary_text([report])
    pattern = re.escape(word).replace(r"\-", "[-_]").replace("_", "[-_]")
    (grep,) = yield [
        Call(
            "grep",
            {
                "host": q.host,
                "path": engine,
                "pattern": pattern,
                "ignore_case": True,
                "include_glob": "*.py",
                "max_matches": 20,
            },
        )
    ]
    report = _engine_report(grep, engine, repr(word))
    yield [report]
    return _summary_text([report])


def _engine_report(grep: Result, engine: str, what: str) -> Report:
    matches = int((grep.data or {}).get("matches") or 0)
    files = (grep.data or {}).get("files") or []
    if matches:
        hits = [ln.strip() for ln in grep.output.splitlines() if re.match(r"[^:]+:\d+:", ln)]
        hits.sort(key=lambda ln: "class " not in ln)  # a definition says more than a use
        return Report(
            f"{engine} mentions {what} in {matches} line(s) across {len(files)} file(s)"
            f", e.g. {files[0]}.",
            "yes",
            0.8,
            [(grep, hit) for hit in hits[:3]],
        )
    return Report(
        f"{engine} has no mention of {what}.", "no", 0.6, [(grep, grep.line("no matches"))]
    )


SPECULATIVE_WORDS = ("speculative", "mtp", "nextn", "draft", "eagle")


def plan_serve(q: Question) -> Plan:
    model = next(iter(q.paths), None)
    if model is None:
        return (
            "To serve and benchmark, name the model folder in the question, e.g. "
            "'serve /models/X with sglang and benchmark at concurrency 8'."
        )
    engine = "vllm" if q.has("vllm") else "sglang"
    match = re.search(r"concurrency (\d+)", q.text.lower())
    concurrency = int(match.group(1)) if match else 8
    port_match = re.search(r"port (\d+)", q.text.lower())
    port = int(port_match.group(1)) if port_match else 30000 if engine == "sglang" else 8000
    if q.has(*SPECULATIVE_WORDS):
        return (yield from _plan_speculative_ab(q, engine, model, port, concurrency))
    run = yield from _serve_and_bench(q, engine, model, port, concurrency, None, 128)
    if isinstance(run, Report):
        yield [run]
        return _summary_text([run])
    bench, stop = run
    phases = ((bench.data or {}).get("report") or {}).get("phases") or [{}]
    p = phases[0]
    if bench.is_error or not p.get("completed"):
        claim = f"The benchmark of {engine} serving {model} did not complete."
    else:
        claim = (
            f"{engine} serving {model} at concurrency {concurrency}: output throughput "
            f"{p['output_throughput']:.1f} tok/s, {p['request_throughput']:.2f} req/s, "
            f"TTFT p50 {p['ttft']['p50']:.1f} ms, TPOT p50 {p['tpot']['p50']:.2f} ms "
            f"({p['completed']}/{p['requests']} requests ok)"
        )
    report = Report(
        claim,
        "unknown" if bench.is_error or not p.get("completed") else "yes",
        0.8,
        [(bench, _phase_line(bench)), (stop, stop.line("stop"))],
    )
    yield [report]
    return _summary_text([report])


def _phase_line(bench: Result) -> str | None:
    return next((ln.strip() for ln in bench.output.splitlines() if re.match(r"\s*0 c=", ln)), None)


def _serve_and_bench(
    q: Question,
    engine: str,
    model: str,
    port: int,
    concurrency: int,
    speculative: dict[str, Any] | None,
    output_len: int,
) -> Generator[Step, list[Result], Report | tuple[Result, Result]]:
    """Launch, benchmark, stop; a Report when the server did not start."""
    launch_input: dict[str, Any] = {
        "host": q.host,
        "engine": engine,
        "model_path": model,
        "port": port,
    }
    if speculative:
        launch_input["speculative"] = speculative
    (launch,) = yield [Call("launch_server", launch_input)]
    which = "with speculative decoding" if speculative else "without speculative decoding"
    if launch.is_error:
        return Report(
            f"The {engine} server for {model} ({which}) did not start.",
            "unknown",
            0.7,
            [(launch, launch.line("error") or launch.line("not"))],
        )
    server_id = (launch.data or {}).get("server_id", "")
    (bench,) = yield [
        Call(
            "run_benchmark",
            {
                "host": q.host,
                "endpoint": f"http://127.0.0.1:{port}",
                "model": model,
                "concurrency": [concurrency],
                "num_prompts": max(16, 4 * concurrency),
                "input_len": 256,
                "output_len": output_len,
                "label": which,
            },
        )
    ]
    (stop,) = yield [Call("stop_server", {"host": q.host, "server_id": server_id})]
    return bench, stop


def _plan_speculative_ab(q: Question, engine: str, model: str, port: int, concurrency: int) -> Plan:
    """What speculative decoding gains: the same workload without and with it, compared."""
    algorithm = "EAGLE" if q.has("eagle") else "NEXTN"
    runs = []
    for speculative in (None, {"algorithm": algorithm}):
        run = yield from _serve_and_bench(q, engine, model, port, concurrency, speculative, 64)
        if isinstance(run, Report):
            yield [run]
            return _summary_text([run])
        runs.append(run)
    (off, _), (on, stop) = runs
    paths = [(r.data or {}).get("jsonl") for r in (off, on)]
    if off.is_error or on.is_error or not all(paths):
        failed = off if off.is_error else on
        report = Report(
            f"The benchmarks of {engine} serving {model} without and with speculative "
            "decoding did not both complete.",
            "unknown",
            0.7,
            [(failed, failed.line("error") or failed.line("fail"))],
        )
        yield [report]
        return _summary_text([report])
    (verdict,) = yield [
        Call(
            "compare_benchmarks",
            {"host": q.host, "baseline": paths[0], "candidate": paths[1], "factor": ["label"]},
        )
    ]
    diffs = {
        (m["metric"], m["stat"]): m
        for phase in (verdict.data or {}).get("phases", [])[:1]
        for m in phase["metrics"]
    }
    tpot, e2e = diffs.get(("tpot", "p50"), {}), diffs.get(("e2e", "p50"), {})
    if tpot.get("significant") and (tpot.get("rel_diff") or 0) < 0:
        answer = "yes"
    elif any(m.get("significant") for m in (tpot, e2e)):
        answer = "no"
    else:
        answer = "unknown"
    claim = (
        f"{engine} serving {model} at concurrency {concurrency}, speculative decoding "
        f"({algorithm}) against none: {(verdict.data or {}).get('summary', 'no comparison')}"
    )
    report = Report(
        claim,
        answer,
        0.8,
        [
            (verdict, verdict.line("TPOT p50")),
            (verdict, verdict.line("E2E p50")),
            (on, _phase_line(on)),
            (stop, stop.line("stop")),
        ],
    )
    yield [report]
    return _summary_text([report])


_GPUS = re.compile(r"\b(\d+)\s*[x×]\s*((?:nvidia[\s-]*)?[a-z]{1,3}\d{2,3}[a-z0-9-]*)", re.I)
_GPU_NAME = re.compile(r"\b((?:gb|b|h|a|l)\d{2,3}s?(?:-?(?:sxm|pcie|nvl|\d+gb))*)\b", re.I)
_CONTEXT = re.compile(
    r"(\d+(?:\.\d+)?)\s*([km])?\s*(?:tokens?\s+(?:of\s+)?)?context"
    r"|context(?:\s+length)?\s+(?:of\s+)?(\d+(?:\.\d+)?)\s*([km])?",
    re.I,
)


def capacity_input(q: Question, model_dir: str) -> dict[str, Any]:
    """capacity_plan's input from the question's words: GPUs, parallelism, context, engine."""
    args: dict[str, Any] = {"host": q.host, "model_dir": model_dir}
    text = q.text
    gpus = _GPUS.search(text)
    if gpus:
        args["gpus"] = f"{gpus.group(1)}x{gpus.group(2)}"
    elif named := _GPU_NAME.search(text):
        args["gpus"] = named.group(1)
    for key in ("tp", "pp", "dp", "ep"):
        found = re.search(rf"\b{key}(?:[\s=-]*size)?[\s=:]*(\d+)\b", text, re.I)
        if found:
            args[key] = int(found.group(1))
    if "tp" not in args and gpus:
        args["tp"] = int(gpus.group(1))
    context = _CONTEXT.search(text)
    if context:
        number, unit = context.group(1) or context.group(3), context.group(2) or context.group(4)
        scale = {"k": 1024, "m": 1024 * 1024}.get((unit or "").lower(), 1)
        args["context_length"] = int(float(number) * scale)
    if q.has("vllm"):
        args["engine"] = "vllm"
    if re.search(r"fp8\s+kv|kv(?:\s+cache)?\s+(?:in\s+)?fp8", text, re.I):
        args["kv_cache_dtype"] = "fp8_e4m3"
    if q.has("mtp", "nextn", "eagle", "speculative"):
        args["speculative"] = "eagle" if q.has("eagle") else "mtp"
    return args


def plan_capacity(q: Question) -> Plan:
    dirs = yield from _model_dirs(q)
    if not dirs:
        return _no_checkpoint(q)
    (result,) = yield [Call("capacity_plan", capacity_input(q, dirs[0]))]
    if result.is_error:
        report = Report(
            f"capacity_plan could not answer for {dirs[0]}: {result.output.strip()[:300]}",
            "unknown",
            0.4,
            [(result, result.line("error"))],
        )
        yield [report]
        return _summary_text([report])
    reports = _capacity_reports(result)
    yield reports
    return _summary_text(reports)


def _capacity_reports(r: Result) -> list[Report]:
    d = r.data or {}
    verdict = d.get("verdict")
    gpu = (d.get("gpu") or {}).get("smi_name", "the GPUs")
    setup = (
        f"{d.get('model_dir')} on {d.get('gpu_count')}× {gpu} with {d.get('engine')} "
        f"tp {d.get('tp')}"
        + (f" pp {d['pp']}" if d.get("pp", 1) > 1 else "")
        + f" at a {d.get('context_length', 0):,}-token context"
    )
    said = {"fits": "fits", "does_not_fit": "does not fit", "incompatible": "will not load"}
    failed = [x for x in d.get("reasons", []) if not x.get("ok")]
    why = "; ".join(f"{x['check']}: {x['detail']}" for x in failed[:3])
    reports = [
        Report(
            f"{setup}: {said.get(str(verdict), verdict)}. Weights take "
            f"{d.get('weight_bytes_per_gpu', 0) / 2**30:.2f} GiB per GPU; the KV cache costs "
            f"{d.get('kv_bytes_per_token_per_gpu', 0):,} bytes per token per GPU, so the pool "
            f"holds {d.get('max_kv_tokens', 0):,} tokens: "
            f"{d.get('max_concurrent_at_context', 0):,} concurrent request(s) at that context"
            + (f". Blocking: {why}" if failed else ""),
            "yes" if verdict == "fits" else "no",
            0.8 if verdict == "fits" else 0.85,
            [
                (r, r.line("verdict:")),
                (r, r.line("KV bytes per token per GPU:")),
                (r, r.line("max KV tokens:")),
                *((r, r.line(f"[FAIL] {x['check']}:")) for x in failed[:2]),
            ],
            [
                "Confirm with one launch: SGLang logs 'KV Cache is allocated. #tokens', vLLM "
                "'GPU KV cache size: N tokens'."
            ],
        )
    ]
    quant = next((x for x in d.get("reasons", []) if x["check"] == "quantization_on_gpu"), None)
    if quant is not None:
        reports.append(
            Report(
                f"Quantisation on {gpu}: {quant['detail']}",
                "yes" if quant["ok"] else "no",
                0.8,
                [(r, r.line("quantization_on_gpu:")), (r, r.line("rules:"))],
            )
        )
    return reports


def _unroutable(q: Question) -> Plan:
    families = "\n".join(f"- {text}" for text in FAMILY_HELP.values())
    return (
        f"The offline playbook cannot route this question: {q.text!r}\n"
        f"It knows these families:\n{families}\n"
        "Open questions need a language model: set ANTHROPIC_API_KEY, or pass --base-url "
        "for an OpenAI-compatible endpoint."
    )
    yield []  # never reached; makes this a generator like the other plans


def _summary_text(reports: list[Report]) -> str:
    # The findings are shown (and recorded) once, as findings; the closing text only counts
    # them, so a terminal never prints each claim twice.
    n = len(reports)
    return f"The playbook reported {n} finding{'' if n == 1 else 's'}."


PLANS: dict[str, Callable[[Question], Plan]] = {
    "mtp": plan_mtp,
    "quant": plan_quant,
    "arch": plan_arch,
    "env": plan_env,
    "engine": plan_engine,
    "serve": plan_serve,
    "capacity": plan_capacity,
}
