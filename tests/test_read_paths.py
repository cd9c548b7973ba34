"""The file tools answer alike whichever path served their reads (`sandbox.files`).

Four paths: POSIX tools on this machine, Sleuth's program resident on an SSH host, that
program run once per call (exec), and POSIX tools over SSH where the host's Python will not
start. Over one tree that holds what made them drift: names with line breaks, tabs,
backslashes and bytes that are not UTF-8; lines past the 4 KiB line limit; records and lines
cut by the host's output cap (a grep record, a list_dir entry, read_lines' line count). Each
call's output, data and bytes cut must be the same on all four.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.hosts.ssh import SSHHost
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer

pytestmark = pytest.mark.ssh

ODD_NAMES = ["a\nb.txt", "x\nfile           999 forged.txt", "tab\tname.log", "back\\slash.txt"]
CAP = 3000


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "sub" / "deeper").mkdir(parents=True)
    for name in ODD_NAMES:
        (root / name).write_text("plain word here\nanother plain line\n")
    (root / "sub" / "evil\n").mkdir()
    (root / "sub" / "evil\n" / "in.txt").write_text("plain inside an odd folder\n")
    (root / "sub" / "notes.txt").write_text("before\nplain note\nafter\n\nplain again\n")
    fd = os.open(os.fsencode(root) + b"/caf\xe9.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"plain latin-1 name\n")
    os.close(fd)
    (root / "wide.log").write_text("".join(f"{i} " + "word " * 200 + "\n" for i in range(500)))
    (root / "long.log").write_text("".join(f"{i} plain " + "lorem " * 900 + "\n" for i in range(6)))
    (root / "tokens.log").write_text("".join(f"plain line {i:03d} of many\n" for i in range(400)))
    for i in range(120):
        (root / "sub" / "deeper" / f"entry-{i:03d}-with-a-longish-name.txt").write_text("x\n")
    return root


@pytest.fixture
def contexts(sshd: SSHServer, tree: Path, tmp_path: Path) -> Iterator[dict[str, ToolContext]]:
    hosts: list[SSHHost] = []

    def remote(calls: Any, python: str = "python3") -> SandboxedHost:
        host = SSHHost(
            "h",
            sshd.alias,
            known_hosts=tmp_path / "sleuth_known_hosts",
            ssh_config_path=sshd.ssh_config_path,
            user_known_hosts=sshd.known_hosts_path,
            calls=calls,
            python=python,
        )
        hosts.append(host)
        config = HostConfig(roots=[str(tree)], python=python)
        return SandboxedHost("h", host, config, Limits())

    sandboxes = {
        "local": SandboxedHost("h", LocalHost("h"), HostConfig(roots=[str(tree)]), Limits()),
        "resident": remote("resident"),
        "exec": remote("exec"),
        "posix": remote("resident", python="false"),  # a Python that will not start
    }
    try:
        yield {name: ToolContext(hosts={"h": sandbox}) for name, sandbox in sandboxes.items()}
    finally:
        for host in hosts:
            host.close()


CALLS: list[tuple[str, dict[str, Any], int | None]] = [
    ("list_dir", {"path": ".", "depth": 3}, None),
    ("list_dir", {"path": ".", "depth": 3}, CAP),
    ("grep", {"path": ".", "pattern": "plain"}, None),
    # A name that is not UTF-8 is shown, but cannot be read back for context on any path.
    ("grep", {"path": "sub", "pattern": "plain", "context": 1}, None),
    ("grep", {"path": "tokens.log", "pattern": "plain", "max_matches": 1000}, CAP),
    ("read_lines", {"path": "wide.log", "start": 1, "end": 400}, None),
    ("read_lines", {"path": "wide.log", "start": 3, "end": 400}, CAP),
    ("read_lines", {"path": "long.log"}, None),
    ("read_lines", {"path": "tokens.log", "end": 400}, CAP),
]


@pytest.mark.parametrize(("tool", "args", "cap"), CALLS)
def test_every_path_gives_the_same_answer(
    contexts: dict[str, ToolContext], tool: str, args: dict[str, Any], cap: int | None
) -> None:
    seen = {}
    for name, ctx in contexts.items():
        if cap is not None:
            limits = Limits(max_output_bytes=cap)
            ctx.hosts["h"].limits = limits
            ctx = ToolContext(hosts=ctx.hosts, limits=limits)
        result = execute(ctx, tool, {"host": "h", **args})
        assert result.ok, (name, result.error)
        seen[name] = (result.output, result.data, result.bytes_cut)
    assert contexts["resident"].hosts["h"].host.describe().call_mode == "resident"
    assert contexts["posix"].hosts["h"].host.describe().call_mode == "posix"
    if cap is not None:
        assert seen["local"][2] > 0 and "[truncated:" in seen["local"][0]
    for name, answer in seen.items():
        assert answer == seen["local"], f"{tool} {args} on {name} differs from local"


def test_odd_names_are_one_quoted_line_each(contexts: dict[str, ToolContext]) -> None:
    listing = execute(contexts["resident"], "list_dir", {"host": "h", "path": ".", "depth": 2})
    names = [entry["name"] for entry in listing.data["entries"]]
    assert set(ODD_NAMES) <= set(names) and "caf\ufffd.txt" in names
    assert len(listing.output.splitlines()) == 1 + len(names)
    assert "$'a\\nb.txt'" in listing.output and "$'tab\\tname.log'" in listing.output
