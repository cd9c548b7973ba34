"""Every tool's arguments, fuzzed through the real sshd.

Inputs are drawn from each tool's own JSON schema, with strings taken from a
corpus of shell metacharacters, option-looking words, globs, NULs, line breaks,
path escapes and symlinks that lead out of the roots. For every call:

- no injected command runs: a canary file that any of them would create never appears;
- no output holds the SECRET marker planted outside the roots (also behind symlinks inside);
- the result is a ToolResult and never an "internal error";
- read-only tools run only Sleuth's own programs (sed, grep, find, nvidia-smi, journalctl,
  python).

launch_server with engine=command runs a command by design; its argv is drawn with a
harmless program first and hostile words after it, and must run without a shell.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import secrets
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost, RunResult
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.posix_files import COUNT_SCRIPT, READ_LINES_SCRIPT
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import all_tools
from sleuth.transcripts.results import ToolResult
from tests.sshd import SSHServer

from . import figures

CANARY = f"SLEUTH_CANARY_{secrets.token_hex(4)}"
SECRET = f"SLEUTH-SECRET-{secrets.token_hex(6)}"
CI_EXAMPLES = 1_000
DEEP_EXAMPLES = 10_000
EXEC_SHARE = 4
"""The share of the examples drawn on the exec path, where every file request starts a Python
on the host: the whole draw there takes 190 s against 116 s resident (mostly launch_server,
which runs the same either way); a quarter keeps the suite's time, checking the same
property on every read tool."""

INJECTIONS = [
    f"$(touch {CANARY})",
    f"`touch {CANARY}`",
    f";touch {CANARY}",
    f"; touch /tmp/{CANARY}",
    f"|touch {CANARY}",
    f"&& touch {CANARY}",
    f"|| touch {CANARY}",
    f"\ntouch {CANARY}",
    f"\rtouch {CANARY}",
    f"x'; touch {CANARY}; echo '",
    f'x"; touch {CANARY}; echo "',
    f"$(touch /tmp/{CANARY})",
    f"${{IFS}}touch${{IFS}}{CANARY}",
    f"> {CANARY}",
    f"--exec=touch {CANARY}",
    f"-exec touch {CANARY} ;",
    f"-fprint {CANARY}",
    f"--output={CANARY}",
    f"-e s/x/x/w {CANARY}",
    f"1w {CANARY}",
    f"-c touch {CANARY}",
    "--help",
    "--version",
    "-r",
    "-",
    "--",
    "-e",
    "*",
    "?",
    "[a-z]*",
    "{a,b}",
    "~",
    "$HOME",
    "\x00",
    f"a.txt\x00{CANARY}",
    "%s%n%x",
    "'",
    '"',
    "\\",
    "",
    " ",
    "ünïcødé ✓",
    "A" * 3000,
]
ESCAPES = [
    "../outside/SECRET.txt",
    "../../outside/SECRET.txt",
    "OUTSIDE/SECRET.txt",
    "link_secret",
    "link_outside",
    "link_outside/SECRET.txt",
    "ckpt_escape",
    "ckpt_escape/config.json",
    "sub/../../outside/SECRET.txt",
    "~/.ssh/id_ed25519",
    "/etc/shadow",
    "/proc/self/environ",
    "/",
    "..",
]
GOOD_PATHS = ["a.txt", "config.json", "sub", "sub/b.py", ".", "ckpt", "ckpt/model.safetensors"]
SAFE_PROGRAMS = ["echo", "/bin/echo", "printf", "true", "/usr/bin/env"]
PYTHONISH = re.compile(r"(?:^|/)python[0-9.]*$")
OWN_PROGRAMS = {"sed", "grep", "find", "nvidia-smi", "journalctl"}
OWN_PROGRAMS |= {"docker", "podman", "nerdctl", "kubectl"}  # list_containers' fixed argv


@dataclass
class Recorder:
    """Every argv a host was asked to run, with the tool that asked."""

    runs: list[tuple[str, list[str]]] = field(default_factory=list)
    current: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, argv: Sequence[str]) -> None:
        with self.lock:
            self.runs.append((self.current, list(argv)))


class RecordingSSH(SSHHost):
    recorder: Recorder

    def run(self, argv: Sequence[str], **kw: Any) -> RunResult:
        self.recorder.add(argv)
        return super().run(argv, **kw)


class RecordingLocal(LocalHost):
    recorder: Recorder

    def run(self, argv: Sequence[str], **kw: Any) -> RunResult:
        self.recorder.add(argv)
        return super().run(argv, **kw)


def plant_tree(base: Path) -> Path:
    root, outside = base / "root", base / "outside"
    (root / "sub").mkdir(parents=True)
    (root / "ckpt").mkdir()
    outside.mkdir()
    (outside / "SECRET.txt").write_text(f"{SECRET}\n")
    (outside / "config.json").write_text(json.dumps({"secret": SECRET, "architectures": [SECRET]}))
    (root / "a.txt").write_text("alpha\nbeta\n--exec\n$(touch x)\n")
    (root / "config.json").write_text(json.dumps({"architectures": ["X"], "n": [1, 2]}))
    (root / "sub" / "b.py").write_text("import os\nprint('hi')\n")
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(root / "ckpt" / "model.safetensors"))
    (root / "ckpt" / "config.json").write_text(json.dumps({"architectures": ["Y"]}))
    os.symlink(outside / "SECRET.txt", root / "link_secret")
    os.symlink(outside, root / "link_outside")
    (root / "ckpt_escape").mkdir()
    os.symlink(outside / "config.json", root / "ckpt_escape" / "config.json")
    os.symlink(outside / "SECRET.txt", root / "ckpt_escape" / "model.safetensors")
    return root


class Approve:
    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked += 1
        return ApprovalDecision(approved=True, by="fuzz")


@pytest.fixture(scope="module")
def world(
    sshd: SSHServer, tmp_path_factory: pytest.TempPathFactory, ssh_calls: Any
) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("fuzz")
    root = plant_tree(base)
    recorder = Recorder()
    ssh = RecordingSSH(
        "remote",
        sshd.alias,
        known_hosts=base / "sleuth_known_hosts",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
        calls=ssh_calls,
    )
    ssh.recorder = recorder
    local = RecordingLocal("local")
    local.recorder = recorder
    mutating = [name for name, t in all_tools().items() if t.mutating]
    config = HostConfig(ssh=sshd.alias, roots=[str(root)], allow=mutating)
    limits = Limits(timeout_s=5)
    hosts = {
        "remote": SandboxedHost("remote", ssh, config, limits),
        "local": SandboxedHost(
            "local", local, HostConfig(roots=[str(root)], allow=mutating), limits
        ),
    }
    ctx = ToolContext(hosts=hosts, limits=limits, approver=Approve())
    yield {
        "ctx": ctx,
        "root": root,
        "base": base,
        "recorder": recorder,
        "sshd": sshd,
        "ok_tools": set(),
        "calls": ssh_calls,
    }
    ssh.close()


# ---------------------------------------------------------------- strategies from schemas

hostile = st.sampled_from(INJECTIONS)
paths = st.one_of(
    st.sampled_from(GOOD_PATHS),
    st.sampled_from(ESCAPES),
    hostile,
    st.tuples(st.sampled_from(GOOD_PATHS + ESCAPES), hostile).map(lambda p: posixpath.join(*p)),
)
strings = st.one_of(
    hostile,
    st.text(max_size=20),
    st.tuples(st.sampled_from(["a", "x", "sglang", "-v"]), hostile).map("".join),
)
PATHY = {"path", "model_dir", "draft_model_path", "results_dir"}
SMALL_NUMBERS = {"timeout_s": 2.0, "grace_s": 1.0, "poll_s": 0.2}


def for_property(name: str, prop: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in prop:
        return for_object(defs[prop["$ref"].split("/")[-1]], defs)
    if "anyOf" in prop:
        return st.one_of([for_property(name, p, defs) for p in prop["anyOf"]])
    if "enum" in prop:
        return st.sampled_from([*prop["enum"], "bogus"])
    kind = prop.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if name in SMALL_NUMBERS:
        top = SMALL_NUMBERS[name]
        return st.one_of(st.floats(0.05, top), st.sampled_from([0, -1, 1e9]))
    if kind in ("integer", "number"):
        low, high = prop.get("minimum", -(2**31)), prop.get("maximum", 2**31)
        small = st.integers(max(low, -2), min(high, 4)) if low <= 4 else st.integers(low, high)
        return st.one_of(small, st.sampled_from([low - 1, high + 1, -(2**63), 2**63]))
    if kind == "array":
        return st.lists(for_property(name, prop.get("items", {}), defs), max_size=4)
    if kind == "object":
        names = st.sampled_from(["CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "X;touch", "a b", ""])
        return st.dictionaries(names, strings, max_size=3)
    if name == "host":
        return st.sampled_from(["remote"] * 6 + ["local", "nosuch", f"$(touch {CANARY})"])
    if name == "endpoint":
        return st.one_of(
            st.integers(1024, 65535).map(lambda p: f"http://127.0.0.1:{p}"),
            hostile.map(lambda h: f"http://127.0.0.1:1/{h}"),
            hostile,
        )
    if name in PATHY:
        return paths
    if name in ("python", "pattern", "include_glob", "pointer", "ready_log_line"):
        return st.one_of(strings, paths)
    return strings


def for_object(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: for_property(k, v, defs) for k, v in props.items() if k in required},
        optional={k: for_property(k, v, defs) for k, v in props.items() if k not in required},
    )


def launch_command() -> st.SearchStrategy[dict[str, Any]]:
    """engine=command with a harmless program first: the hostile words must stay words."""
    argv = st.tuples(st.sampled_from(SAFE_PROGRAMS), st.lists(hostile, max_size=5)).map(
        lambda t: [t[0], *t[1]]
    )
    return st.fixed_dictionaries(
        {
            "host": st.sampled_from(["remote", "remote", "local"]),
            "engine": st.just("command"),
            "command": argv,
            "ready_log_line": st.just("never printed"),
            "timeout_s": st.floats(0.2, 1.0),
            "poll_s": st.just(0.05),
        },
        optional={"env": st.dictionaries(st.sampled_from(["A", "B_1"]), hostile, max_size=2)},
    )


def tool_calls() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    tools = all_tools()
    choices = []
    for name, spec in sorted(tools.items()):
        schema = spec.input_schema()
        inputs = for_object(schema, schema.get("$defs", {}))
        if name == "launch_server":
            # engine=command runs a command by design; fuzzed argv[0] is the approver's business.
            inputs = inputs.filter(lambda d: d.get("engine") != "command")
            choices.append(st.tuples(st.just(name), launch_command()))
        choices.append(st.tuples(st.just(name), inputs))
    extra = st.fixed_dictionaries({"host": st.just("remote"), "bogus_key": strings})
    choices.append(st.tuples(st.sampled_from(sorted(tools)), extra))
    choices.append(st.tuples(hostile, st.just({"host": "remote"})))
    return st.one_of(choices)


# ---------------------------------------------------------------- checks


def canary_places(world: dict[str, Any]) -> list[Path]:
    sshd: SSHServer = world["sshd"]
    dirs = [Path.cwd(), Path("/tmp"), Path.home(), Path("/root"), sshd.home, world["root"]]
    return [d / CANARY for d in dirs]


def canary_anywhere(world: dict[str, Any]) -> list[str]:
    found = [str(p) for p in canary_places(world) if os.path.lexists(p)]
    for top in (world["base"], Path("/tmp"), world["sshd"].home, Path.cwd()):
        out = subprocess.run(
            ["find", str(top), "-xdev", "-name", f"*{CANARY}*"],
            capture_output=True,
            text=True,
        ).stdout
        found += [line for line in out.splitlines() if "tool_calls" not in line]
    return sorted(set(found))


def foreign_programs(runs: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    tools = all_tools()
    bad = []
    for tool_name, argv in runs:
        spec = tools.get(tool_name)
        if spec is None or spec.mutating:
            continue
        if argv[:2] == ["sh", "-c"] and argv[2:3] in ([READ_LINES_SCRIPT], [COUNT_SCRIPT]):
            continue  # read_lines' fixed pipelines
        if argv[0] not in OWN_PROGRAMS and not PYTHONISH.search(argv[0]):
            bad.append((tool_name, argv))
    return bad


def check_one(world: dict[str, Any], name: str, raw: dict[str, Any]) -> None:
    recorder: Recorder = world["recorder"]
    recorder.current = name
    start = len(recorder.runs)
    result = execute(world["ctx"], name, raw)
    figures.count("fuzz_examples")
    if result.ok:
        world["ok_tools"].add(name)
    runs = recorder.runs[start:]

    assert isinstance(result, ToolResult)
    unhandled = "internal error" in (result.error or "")
    figures.count("fuzz_unhandled", int(unhandled))
    assert not unhandled, result.error

    seen = result.output + (result.error or "") + json.dumps(result.data, default=str)
    leaked = SECRET in seen
    figures.count("fuzz_reads_outside_roots", int(leaked))
    assert not leaked, f"{name} {raw!r} showed the secret: {result.output[:300]}"

    canaries = [str(p) for p in canary_places(world) if os.path.lexists(p)]
    figures.count("fuzz_commands_executed", len(canaries))
    assert not canaries, f"{name} {raw!r} ran an injected command: {canaries}"

    foreign = foreign_programs(runs)
    figures.count("fuzz_foreign_programs", len(foreign))
    assert not foreign, f"{name} {raw!r} ran a program that is not Sleuth's own: {foreign}"

    if name == "launch_server" and raw.get("engine") == "command":
        shells = [argv for _, argv in runs if any(a in ("sh", "bash", "-c") for a in argv[:1])]
        figures.count("fuzz_command_shell_runs", len(shells))
        assert not shells


@pytest.mark.ssh
def test_fuzzed_tool_calls_run_nothing_read_nothing_outside_and_never_crash(
    world: dict[str, Any], deep: bool
) -> None:
    for name in ("fuzz_commands_executed", "fuzz_reads_outside_roots", "fuzz_unhandled"):
        figures.touch(name)
    figures.touch("fuzz_foreign_programs")
    figures.touch("fuzz_command_shell_runs")

    @settings(
        max_examples=(DEEP_EXAMPLES if deep else CI_EXAMPLES)
        // (EXEC_SHARE if world["calls"] == "exec" else 1),
        deadline=None,
        derandomize=not deep,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(call=tool_calls())
    # Valid calls first, so each read tool is known to run for real whatever the draw is.
    @example(call=("read_lines", {"host": "remote", "path": "a.txt"}))
    @example(call=("grep", {"host": "remote", "pattern": "x", "path": "."}))
    @example(call=("list_dir", {"host": "remote", "path": "sub"}))
    @example(call=("read_json", {"host": "remote", "path": "config.json"}))
    @example(call=("python_env", {"host": "remote"}))
    def fuzz(call: tuple[str, dict[str, Any]]) -> None:
        check_one(world, *call)

    fuzz()
    assert canary_anywhere(world) == []
    # The fuzz reached the tools themselves, not only the input validation.
    assert {"read_lines", "grep", "list_dir", "read_json", "python_env"} <= world["ok_tools"]


@pytest.mark.ssh
def test_command_engine_runs_argv_without_a_shell(world: dict[str, Any]) -> None:
    words = [f"$(touch {CANARY})", f";touch {CANARY}", f"`touch {CANARY}`", "*", "$HOME"]
    result = execute(
        world["ctx"],
        "launch_server",
        {
            "host": "remote",
            "engine": "command",
            "command": ["printf", "[%s]", *words],
            "ready_log_line": "never printed",
            "timeout_s": 3,
            "poll_s": 0.05,
        },
    )
    assert result.argv == [["printf", "[%s]", *words]]
    for word in words:
        assert f"[{word}]" in result.output  # printed literally: no expansion, no glob
    assert canary_anywhere(world) == []


@pytest.mark.ssh
def test_python_env_refuses_an_interpreter_that_is_not_python(world: dict[str, Any]) -> None:
    recorder: Recorder = world["recorder"]
    recorder.current = "python_env"
    before = len(recorder.runs)
    result = execute(world["ctx"], "python_env", {"host": "remote", "python": "/usr/bin/touch"})
    assert not result.ok and "python" in (result.error or "")
    assert recorder.runs[before:] == []
