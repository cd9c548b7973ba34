"""Host program answers of the wrong shape, tried as an attacker would (issue 39, finding 15).

The host's `python` (sleuth.toml's, or one that is not what it says) answers every request
with JSON of another shape: each field Sleuth reads comes back as a list. Every probe and
host-program answer is read through a model at the boundary, so each is a tool error of kind
`host` that names the host and the program, never an internal error with a traceback.
Locally, over the test sshd (both call modes) and through an MCP client.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import deny_all
from sleuth.tools.context import ToolContext
from tests.checkpoint_fixtures import tiny_qwen_mtp
from tests.mcp_support import McpProject, text_of
from tests.server_records import local_or_remote
from tests.sshd import SSHServer

from . import figures

# Runs the program it is given (`-c CODE ARGS` or `- ARGS` with the code on stdin) as python
# would, but every JSON object it prints or frames that holds the field MARK (any, for None),
# but for the hello and failures, has each field but `ok` and `id` (which answer it is)
# turned into ["?"].
WRONG_SHAPE = """#!{python}
import json, os, sys
sys.executable = os.path.abspath(__file__)  # the program's own children run as this too
_dumps = json.dumps
MARK = {mark!r}
def dumps(obj, *args, **kwargs):
    if (
        isinstance(obj, dict)
        and "protocol" not in obj
        and obj.get("ok", True) is not False
        and (MARK is None or MARK in obj)
    ):
        obj = {{k: (v if k in ("ok", "id") else ["?"]) for k, v in obj.items()}}
    return _dumps(obj, *args, **kwargs)
json.dumps = dumps
args = sys.argv[1:]
while args and args[0] not in ("-c", "-"):
    args = args[1:]
code = args[1] if args[0] == "-c" else sys.stdin.read()
sys.argv = [args[0], *args[2 if args[0] == "-c" else 1:]]
exec(compile(code, "<sleuth-program>", "exec"), {{"__name__": "__main__"}})
"""


def wrong_python(folder: Path, mark: str | None = None) -> Path:
    path = folder / "bin" / "python3"
    path.parent.mkdir(exist_ok=True)
    path.write_text(WRONG_SHAPE.format(python=sys.executable, mark=mark))
    path.chmod(0o755)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "root"
    (made / "model").mkdir(parents=True)
    tiny_qwen_mtp(made / "model")
    (made / "notes.txt").write_text("one\ntwo\n")
    (made / "conf.json").write_text('{"api_key": "not-shown-here"}\n')
    return made


@pytest.fixture(params=["local", "remote"])
def host(request: pytest.FixtureRequest, root: Path, ssh_calls: str) -> SandboxedHost:
    return local_or_remote(request, root)


READ = "Sleuth's program"
# tool, input, the field that marks the answer made wrong (None: every answer), the program
# its error must name
PROBES: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("server_processes", {}, None, "server_procs.py"),
    ("python_env", {}, None, "python_env_probe.py"),
    ("server_status", {}, None, "server_ctl.py (list)"),
    ("checkpoint_summary", {"model_dir": "model"}, "summary", "checkpoint_probe.py"),
    ("read_lines", {"path": "notes.txt"}, None, READ),
    ("read_lines", {"path": "notes.txt"}, "sizes", READ),
    ("read_lines", {"path": "conf.json"}, "files", "secret_scan.py"),
    ("list_dir", {"path": "."}, "entries", READ),
    ("grep", {"path": ".", "pattern": "two"}, "matches", READ),
    ("list_dir", {"path": "."}, "real", READ),
]


def check(host: str, tool: str, ok: bool, kind: str | None, error: str, program: str) -> None:
    where = f"{tool} on {host}"
    figures.count("probe_wrong_shape_tries")
    unclear = "internal error" in error or "Traceback" in error or not (ok or host in error)
    figures.count("probe_wrong_shape_internal", int(unclear))
    assert "internal error" not in error and "Traceback" not in error, where
    if ok:  # read without the program (this machine's POSIX tools): nothing to misread
        assert program == "Sleuth's program" and host == "local", where
        return
    assert kind == "host", f"{where}: {kind} {error}"
    assert f"{program}" in error and f"host {host!r}" in error, f"{where}: {error}"
    assert "cannot read" in error and "[hosts." in error, f"{where}: {error}"


@pytest.mark.parametrize(
    "tool,given,mark,program", PROBES, ids=[f"{t}-{m}" for t, _, m, _ in PROBES]
)
def test_an_answer_of_the_wrong_shape_is_a_host_error_naming_host_and_program(
    host: SandboxedHost,
    tmp_path: Path,
    tool: str,
    given: dict[str, Any],
    mark: str | None,
    program: str,
) -> None:
    if host.name == "local" and (tool == "checkpoint_summary" or mark == "files"):
        pytest.skip("this machine runs it with Sleuth's own interpreter, not the host's")
    host.config.python = str(wrong_python(tmp_path, mark))
    ctx = ToolContext(hosts={host.name: host}, approver=deny_all)
    result = execute(ctx, tool, {"host": host.name, **given})
    assert result.traceback is None, result.traceback
    check(host.name, tool, result.ok, result.error_kind, result.error or "", program)


def test_an_answer_of_the_wrong_shape_through_an_mcp_client(
    tmp_path: Path, sshd: SSHServer
) -> None:
    project = McpProject.create(tmp_path, sshd)
    python = wrong_python(tmp_path)
    toml = project.root / "sleuth.toml"
    toml.write_text(toml.read_text().replace("roots = ", f'python = "{python}"\nroots = '))
    said: list[tuple[str, str, bool, str, str]] = []

    async def session() -> None:
        async with project.client("stdio") as client:
            for name in ("local", "remote"):
                for tool, program in (
                    ("server_processes", "server_procs.py"),
                    ("python_env", "python_env_probe.py"),
                ):
                    result = await client.call_tool(tool, {"host": name})
                    shown = text_of(result) + json.dumps(result.structured_content)
                    said.append((name, tool, bool(result.is_error), program, shown))

    anyio.run(session)
    assert len(said) == 4
    for name, tool, is_error, program, shown in said:
        figures.count("probe_wrong_shape_tries")
        figures.count("probe_wrong_shape_internal", int("internal error" in shown))
        assert is_error, (name, tool, shown)
        assert "internal error" not in shown and "Traceback" not in shown, shown
        assert f"{program} on host {name!r} answered in a shape Sleuth cannot read" in shown
