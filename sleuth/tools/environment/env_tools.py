"""What is installed and what hardware is there: python_env and gpu_info."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind, HostError
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError
from sleuth.transcripts.results import ToolResult


class Package(BaseModel):
    name: str
    installed: bool
    version: str | None = None
    path: str | None = None
    inside_roots: bool = False
    """Whether grep and read_lines may read this package's source."""


class PythonEnv(BaseModel):
    python: str
    python_version: str
    packages: list[Package]


# A read-only tool must not become a way to run any program on the host with argument "-".
PYTHON_NAME = re.compile(r"(?:/[^\x00\n]*/)?python[0-9.]*")


class PythonEnvInput(ToolInput):
    python: str | None = Field(
        None, description="Interpreter to inspect, e.g. /opt/venv/bin/python; default python3."
    )


@tool()
def python_env(ctx: ToolContext, args: PythonEnvInput) -> ToolResult:
    """Report the Python version and the versions and install paths of sglang, vllm, torch,
    transformers and flashinfer on a host, without importing them.

    Use it to find an engine's source tree (then grep it) and to answer "which
    version is installed". Each path says whether it lies inside the host's roots,
    since grep and read_lines can only read there.
    """
    sandbox = ctx.host(args.host)
    python = args.python or sandbox.config.python
    if args.python is not None and not PYTHON_NAME.fullmatch(args.python):
        raise ToolError(
            f"python={args.python!r} is not a Python interpreter; give python3, python3.11 or "
            f"the path of one, e.g. /opt/venv/bin/python"
        )
    try:
        run = sandbox.run_program("python_env_probe.py", [], python=python, timeout=60)
    except HostError as exc:
        raise ToolError(
            f"{python} is not available on host {args.host!r}: {exc}", exc.kind
        ) from exc
    if run.exit_code != 0:
        detail = run.stderr.decode(errors="replace").strip().splitlines()
        raise ToolError(
            f"{python} failed on host {args.host!r} (exit {run.exit_code}): "
            f"{detail[-1] if detail else 'no message'}; pass python=/path/to/python"
        )
    env = PythonEnv.model_validate(json.loads(run.stdout))
    for pkg in env.packages:
        pkg.inside_roots = pkg.path is not None and sandbox.contains(pkg.path)
    lines = [f"{env.python} (Python {env.python_version}) on {args.host}"]
    for pkg in env.packages:
        if pkg.installed:
            where = (
                pkg.path if pkg.inside_roots else f"{pkg.path} (outside the roots: not readable)"
            )
            lines.append(f"{pkg.name} {pkg.version or '(version unknown)'} at {where}")
        else:
            lines.append(f"{pkg.name}: not installed")
    return ToolResult(
        ok=True,
        output="\n".join(lines) + "\n",
        data=env.model_dump(mode="json"),
        argv=[run.argv],
        exit_code=run.exit_code,
    )


class GPU(BaseModel):
    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int | None
    driver: str
    compute_capability: str


class GpuInfoInput(ToolInput):
    pass


GPU_QUERY = "index,name,memory.total,memory.used,utilization.gpu,driver_version,compute_cap"


@tool()
def gpu_info(ctx: ToolContext, args: GpuInfoInput) -> ToolResult:
    """List the host's NVIDIA GPUs: name, memory total and used, utilisation, driver and
    compute capability (9.0 is Hopper, 10.0 Blackwell), from nvidia-smi.

    A host without GPUs or without nvidia-smi is an answer ("no GPU"), not an error.
    """
    sandbox = ctx.host(args.host)
    argv = ["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"]
    try:
        run = sandbox.run(argv, timeout=30)
    except HostError as exc:
        if exc.kind is not ErrorKind.COMMAND_NOT_FOUND:
            raise  # a dropped connection is not an answer about the GPUs
        return _no_gpu(args.host, "nvidia-smi is not installed", argv)
    if run.exit_code == 127:
        return _no_gpu(args.host, "nvidia-smi is not installed", argv)
    if run.exit_code != 0:
        detail = (run.stdout + run.stderr).decode(errors="replace").strip()
        return _no_gpu(args.host, f"nvidia-smi found no usable GPU: {detail[:300]}", argv)
    gpus = [_parse_gpu(line) for line in run.stdout.decode().splitlines() if line.strip()]
    lines = [f"{len(gpus)} GPU(s) on {args.host}:"] + [
        f"GPU {g.index}: {g.name}, {g.memory_used_mib}/{g.memory_total_mib} MiB used, "
        f"util {g.utilization_pct if g.utilization_pct is not None else '?'}%, "
        f"driver {g.driver}, compute capability {g.compute_capability}"
        for g in gpus
    ]
    return ToolResult(
        ok=True,
        output="\n".join(lines) + "\n",
        data={"gpus": [g.model_dump() for g in gpus]},
        argv=[run.argv],
        exit_code=0,
    )


def _no_gpu(host: str, why: str, argv: list[str]) -> ToolResult:
    return ToolResult(
        ok=True,
        output=f"No GPU on host {host}: {why}.\n",
        data={"gpus": [], "reason": why},
        argv=[argv],
    )


def _parse_gpu(line: str) -> GPU:
    f = [part.strip() for part in line.split(",")]
    util = f[4] if f[4].isdigit() else None
    return GPU(
        index=int(f[0]),
        name=f[1],
        memory_total_mib=int(float(f[2])),
        memory_used_mib=int(float(f[3])),
        utilization_pct=int(util) if util else None,
        driver=f[5],
        compute_capability=f[6],
    )
