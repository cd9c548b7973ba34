"""What preflight reads before judging a launch: the launch's own settings, and the host's
facts, gathered at once (the engine's environment, the GPUs, the checkpoint, the draft).

Each fact is a typed model from the family that owns it: `PythonEnv`-like packages from the
preflight probe (run with the engine's own interpreter), gpu_info's `GpuInventory`,
`CheckpointSummary` from the checkpoint probe, the vLLM entry point from launch_input. A
fact that cannot be read is None with the reason beside it; checks then skip or fail on it.
"""

from __future__ import annotations

import json
import posixpath
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from sleuth.hosts.host import HostError, read_whole
from sleuth.hosts.policy import PolicyError, SandboxedHost, check_arg
from sleuth.tools.checkpoints.models import CheckpointSummary
from sleuth.tools.checkpoints.summarize import summarize
from sleuth.tools.context import ToolContext
from sleuth.tools.environment.gpu_info import GPU, query_gpus
from sleuth.tools.program_run import read_answer, run_or_fail
from sleuth.tools.results import ToolError
from sleuth.tools.serving.diagnose import Diagnosis
from sleuth.tools.serving.engines import VllmEntry
from sleuth.tools.serving.launch_input import EngineLaunch, vllm_entry

PROBE_PACKAGES = ("vllm", "sglang", "torch", "sgl_kernel", "bitsandbytes", "flashinfer")
ENTRY_FILES = {"vllm": "vllm/entrypoints/openai/api_server.py", "sglang": "sglang/launch_server.py"}
MAX_JSON_BYTES = 16 << 20
SOURCE_BYTES = 2_000_000


class Settings(BaseModel):
    """The launch as the engine will see it: typed options plus what extra_args set."""

    engine: str
    tp: int = 1
    pp: int = 1
    ep: int = 1
    context: int | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    chat_template: bool = False
    trust_remote_code: bool = False
    mem_fraction: float | None = None


_VALUED = {
    "tp": ("--tensor-parallel-size", "-tp", "--tp-size", "--tp"),
    "pp": ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp"),
    "ep": ("--ep-size", "--expert-parallel-size", "--ep"),
    "context": ("--max-model-len", "--context-length"),
    "dtype": ("--dtype",),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "quantization": ("--quantization", "-q"),
    "mem_fraction": ("--gpu-memory-utilization", "--mem-fraction-static"),
}


def launch_settings(args: EngineLaunch) -> Settings:
    """Read the typed options, then what extra_args set (`--flag value` or `--flag=value`)."""
    given: dict[str, str] = {}
    flags: set[str] = set()
    extra = list(args.extra_args)
    for i, word in enumerate(extra):
        name, has_value, value = word.partition("=")
        flags.add(name.replace("_", "-"))
        for key, spellings in _VALUED.items():
            if name.replace("_", "-") in spellings:
                following = extra[i + 1] if i + 1 < len(extra) else ""
                given[key] = value if has_value else following
    settings = Settings(
        engine=args.engine,
        tp=int(given.get("tp") or args.tp or 1),
        pp=int(given.get("pp") or 1),
        ep=int(given.get("ep") or 1),
        context=int(given["context"]) if given.get("context", "").isdigit() else None,
        dtype=given.get("dtype", "auto").lower(),
        kv_cache_dtype=given.get("kv_cache_dtype", "auto").lower(),
        quantization=given.get("quantization") or args.quantization,
        chat_template="--chat-template" in flags,
        trust_remote_code="--trust-remote-code" in flags,
        mem_fraction=float(given["mem_fraction"]) if "mem_fraction" in given else args.mem_fraction,
    )
    if "--enable-expert-parallel" in flags:
        settings.ep = settings.tp
    return settings


class ProbePackage(BaseModel):
    name: str
    installed: bool
    version: str | None = None
    path: str | None = None


class PortState(BaseModel):
    port: int
    free: bool
    error: str | None = None


class Space(BaseModel):
    path: str
    total: int = 0
    free: int = 0
    error: str | None = None


class HostProbe(BaseModel):
    """The probe's answer for preflight (sleuth/hosts/program/python_env_probe.py, given an
    argument)."""

    python: str
    port: PortState
    shm: Space | None
    disks: list[Space]
    packages: dict[str, ProbePackage]
    torch_cuda: str | None
    files: dict[str, bool]


@dataclass
class Facts:
    settings: Settings
    args: EngineLaunch
    host: SandboxedHost
    model_dir: str | None = None
    config: dict[str, Any] | None = None
    summary: CheckpointSummary | None = None
    draft_config: dict[str, Any] | None = None
    probe: HostProbe | None = None
    gpus: list[GPU] = field(default_factory=list)
    entry: VllmEntry | Diagnosis | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """What could not be read, by fact: model_dir, config, summary, draft, probe, gpus."""

    @property
    def engine_package(self) -> ProbePackage | None:
        return self.probe.packages.get(self.settings.engine) if self.probe else None

    @property
    def engine_source(self) -> str | None:
        """The installed engine's folder when the sandbox may read it."""
        pkg = self.engine_package
        if pkg and pkg.installed and pkg.path and self.host.contains(pkg.path):
            return pkg.path
        return None


def gather(ctx: ToolContext, args: EngineLaunch) -> Facts:
    """Read every fact at once; the slowest (the checkpoint's headers) sets the time."""
    host = ctx.host(args.host)
    facts = Facts(settings=launch_settings(args), args=args, host=host)
    python = check_arg(args.python or host.config.python, "python")
    _resolve_model(facts)
    with ThreadPoolExecutor(5) as pool:
        probe = pool.submit(_probe, host, python, args.port, facts.model_dir)
        gpus = pool.submit(query_gpus, host)
        entry = pool.submit(vllm_entry, host, python) if args.engine == "vllm" else None
        model_dir = facts.model_dir
        summary = (
            pool.submit(summarize, host, model_dir)
            if model_dir is not None and facts.config is not None
            else None
        )
        draft = pool.submit(_draft_config, host, args)
        facts.probe = _settled(facts, "probe", probe.result)
        facts.gpus = gpus.result()[0].gpus
        facts.entry = entry.result() if entry else None
        facts.summary = _settled(facts, "summary", summary.result) if summary else None
        facts.draft_config = _settled(facts, "draft", draft.result)
    return facts


def _settled(facts: Facts, name: str, get: Any) -> Any:
    try:
        return get()
    except (ToolError, HostError, ValueError) as exc:
        facts.errors[name] = str(exc)
        return None


def _resolve_model(facts: Facts) -> None:
    if not facts.args.model_path:
        return
    try:
        facts.model_dir = facts.host.resolve(facts.args.model_path)
    except PolicyError:
        raise  # outside the roots is the sandbox's refusal, not a launch failure
    except ToolError as exc:
        facts.errors["model_dir"] = str(exc)
        return
    kind = facts.host.files.stat(facts.model_dir).kind
    if kind != "dir":
        facts.errors["model_dir"] = f"{facts.model_dir} is not a folder ({kind})"
        facts.model_dir = None
        return
    try:
        facts.config = read_json(facts.host, posixpath.join(facts.model_dir, "config.json"))
    except (ToolError, HostError, ValueError) as exc:
        facts.errors["config"] = str(exc)


def read_json(host: SandboxedHost, path: str) -> dict[str, Any]:
    doc = json.loads(read_whole(host.files, host.resolve(path), size=MAX_JSON_BYTES))
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a JSON object")
    return doc


def _draft_config(host: SandboxedHost, args: EngineLaunch) -> dict[str, Any] | None:
    spec = args.speculative
    if spec is None or spec.draft_model_path is None:
        return None
    return read_json(host, posixpath.join(host.resolve(spec.draft_model_path), "config.json"))


def _probe(host: SandboxedHost, python: str, port: int, model_dir: str | None) -> HostProbe:
    paths = [model_dir] if model_dir else []
    arg = {
        "port": port,
        "paths": paths,
        "packages": PROBE_PACKAGES,
        "files": list(ENTRY_FILES.values()),
    }
    run = run_or_fail(
        host,
        "python_env_probe.py",
        [json.dumps(arg, separators=(",", ":"))],
        python=python,
        timeout=30,
        not_run=f"{python} does not run",
        failed=f"{python} failed",
    )
    return read_answer(host.name, "python_env_probe.py", run.stdout, HostProbe)


def read_source(host: SandboxedHost, path: str) -> list[str] | None:
    """An installed engine file's lines, when inside the roots."""
    try:
        data = read_whole(host.files, host.resolve(path), size=SOURCE_BYTES)
    except (ToolError, HostError):
        return None
    return data.decode(errors="replace").splitlines() if data else None


def cite(facts: Facts, files: tuple[str, ...], needle: str) -> str | None:
    """`host:file:line: text` of the first installed engine line holding `needle`."""
    root = facts.engine_source
    if root is None:
        return None
    for rel in files:
        path = posixpath.join(root, rel)
        for number, text in enumerate(read_source(facts.host, path) or [], 1):
            if needle in text:
                return f"{facts.host.name}:{path}:{number}: {text.strip()}"
    return None
