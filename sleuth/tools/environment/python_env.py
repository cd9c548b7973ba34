"""python_env: the Python version and where sglang, vllm, torch, transformers and flashinfer
are installed on a host, found without importing them."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, field_validator

from sleuth.tools.context import ToolContext
from sleuth.tools.program_run import read_answer, run_or_fail
from sleuth.tools.registry import ToolInput, tool
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


def interpreter_name(python: str | None) -> str | None:
    """A read-only tool's `python` must at least be named like an interpreter; whether it may
    run is consent's (`sleuth/tools/interpreters.py`)."""
    if python is not None and not PYTHON_NAME.fullmatch(python):
        raise ValueError(
            f"python={python!r} is not a Python interpreter; give python3, python3.11 or the "
            "path of one, e.g. /opt/venv/bin/python"
        )
    return python


class PythonEnvInput(ToolInput):
    python: str | None = Field(
        None,
        description="Interpreter to inspect, e.g. /opt/venv/bin/python; default the host's. "
        "One outside the host's configured one runs only if the host vouches for it (outside "
        "the roots, owned by root or the login user), a rule names it, or a person approves.",
    )

    @field_validator("python")
    @classmethod
    def _named_like_python(cls, python: str | None) -> str | None:
        return interpreter_name(python)


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
    run = run_or_fail(
        sandbox,
        "python_env_probe.py",
        [],
        python=python,
        timeout=60,
        not_run=f"{python} is not available",
        failed=f"{python} failed",
        hint="; pass python=/path/to/python",
    )
    env = read_answer(sandbox.name, "python_env_probe.py", run.stdout, PythonEnv)
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
