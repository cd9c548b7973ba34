"""server_processes: the inference servers running on a host, whoever started them, and the
command lines they were started with."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from sleuth.tools.program_run import read_answer, run_or_fail
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import cap_output
from sleuth.transcripts.results import ToolResult


class Flag(BaseModel):
    name: str
    """`--tp-size`; "" for a positional argument."""
    value: str | None = None
    """None for a bare switch (`--enable-torch-compile`)."""


class ServerProcess(BaseModel):
    pid: int
    engine: str
    """sglang, vllm, trtllm or tgi."""
    cwd: str | None
    argv: list[str]
    flags: list[Flag] = Field(default_factory=list)
    """The arguments after the engine's entry point, as flags and values."""


class Found(BaseModel):
    """One process as server_procs.py reports it."""

    pid: int
    engine: str
    argv: list[str]
    cwd: str | None = None
    paths: list[str] = Field(default_factory=list)
    """The absolute paths its arguments name, resolved on the host."""


class Scan(BaseModel):
    """server_procs.py's answer."""

    processes: list[Found]


class ServerProcessesInput(ToolInput):
    pass


@tool()
def server_processes(ctx: ToolContext, args: ServerProcessesInput) -> ToolResult:
    """List the inference servers running on a host (SGLang, vLLM, TensorRT-LLM, TGI), however
    they were started: each one's PID, engine, working folder and full command line, then its
    flags one per line.

    Only processes whose working folder, or a path among their arguments, lies inside the
    host's roots are shown: anything else is outside the sandbox. Use it to see how a server
    was configured (tensor parallelism, memory fraction, quantization, speculative decoding),
    or with host="@GROUP" to find the nodes launched differently.
    """
    sandbox = ctx.host(args.host)
    run = run_or_fail(
        sandbox,
        "server_procs.py",
        [],
        python=None,
        timeout=ctx.limits.timeout_s,
        not_run=f"{sandbox.config.python} cannot run",
        failed="the process scan failed",
    )
    scan = read_answer(sandbox.name, "server_procs.py", run.stdout, Scan)
    found = [_process(raw) for raw in scan.processes if _inside(sandbox, raw)]
    found.sort(key=lambda p: (p.engine, p.argv))
    text, cut = cap_output(
        _render(args.host, found, sandbox), ctx.limits.max_output_bytes, ctx.limits.max_output_lines
    )
    return ToolResult(
        ok=True,
        output=text,
        data={"processes": [p.model_dump() for p in found]},
        argv=[run.argv],
        exit_code=0,
        bytes_cut=cut,
    )


def _inside(sandbox: SandboxedHost, raw: Found) -> bool:
    places = ([raw.cwd] if raw.cwd else []) + raw.paths
    return any(sandbox.contains(place) for place in places)


def _process(raw: Found) -> ServerProcess:
    return ServerProcess(
        pid=raw.pid, engine=raw.engine, cwd=raw.cwd, argv=raw.argv, flags=flags_of(raw.argv)
    )


_ENTRY = ("sglang.launch_server", "vllm.entrypoints")


def flags_of(argv: list[str]) -> list[Flag]:
    """The arguments after the entry point (`-m sglang.launch_server`, `vllm serve`, the
    launcher itself) as flags: `--k v`, `--k=v`, a bare `--k`, or a positional value."""
    start = next((i + 1 for i, a in enumerate(argv) if a.startswith(_ENTRY) or a == "serve"), 1)
    flags: list[Flag] = []
    rest = argv[start:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg.startswith("-") and "=" in arg:
            name, value = arg.split("=", 1)
            flags.append(Flag(name=name, value=value))
        elif arg.startswith("-"):
            follows = i + 1 < len(rest) and not rest[i + 1].startswith("--")
            flags.append(Flag(name=arg, value=rest[i + 1] if follows else None))
            i += follows
        else:
            flags.append(Flag(name="", value=arg))
        i += 1
    return flags


def _render(host: str, found: list[ServerProcess], sandbox: SandboxedHost) -> str:
    if not found:
        roots = ", ".join(sandbox.config.roots) or "(no roots)"
        return (
            f"No inference server on {host} whose working folder or arguments lie inside its "
            f"roots ({roots}).\n"
        )
    lines = [f"{len(found)} inference server process{'es' if len(found) > 1 else ''} on {host}:"]
    for p in found:
        lines.append(f"pid {p.pid}: {p.engine}, working folder {p.cwd or '(unreadable)'}")
        lines.append("  command: " + " ".join(p.argv))
        lines += [f"  {' '.join(w for w in (f.name, f.value) if w)}" for f in p.flags]
    return "\n".join(lines) + "\n"
