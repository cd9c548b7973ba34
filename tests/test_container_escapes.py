"""Container hosts under attack and without Python (issue 40): links swapped in a loop never
lead a read out of the container's roots, and a container with no interpreter is read with
POSIX tools, saying which interpreter is missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.errors import HostError
from sleuth.hosts.container.host import ContainerHost
from sleuth.tools.context import ToolContext
from tests.container_support import ONLY_HERE, WORKSPACE, box_context, need_podman, via_host
from tests.containers import Containers, podman
from tests.sshd import SSHServer
from tests.test_resident import CANARY, RACED, READS, racing_tree

__all__ = ["racing_tree"]

pytestmark = pytest.mark.ssh


def via(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    sshd: SSHServer | None = None
    if request.param == "ssh":
        sshd = request.getfixturevalue("sshd")
    return via_host(request.param, sshd, tmp_path)


@pytest.fixture(params=["local", "ssh"])
def racing_box(
    request: pytest.FixtureRequest, racing_tree: Path, tmp_path: Path
) -> Iterator[ToolContext]:
    """A container that sees the racing tree at the same path, rooted at its `root`."""
    rootfs = need_podman()
    with Containers() as boxes:
        name = boxes.run(rootfs, ["sleep", "infinity"], volumes={str(tmp_path): tmp_path})
        ctx = box_context(name, via(request, tmp_path), roots=[str(racing_tree)])
        yield ctx
        ctx.close()


def test_a_symlink_swapped_in_a_loop_never_leads_out_of_the_container_roots(
    racing_box: ToolContext, racing_tree: Path
) -> None:
    inside = refused = 0
    for i in range(READS):
        tool, args = RACED[i % len(RACED)]
        result = execute(racing_box, tool, {"host": "box", **args})
        seen = result.output + (result.error or "") + json.dumps(result.data, default=str)
        assert CANARY not in seen, f"read {i} ({tool} {args}) got a byte from outside: {seen}"
        inside += result.ok and ("inside" in result.output)
        refused += "outside the roots" in (result.error or "")
    assert inside >= READS // 10 and refused >= READS // 20, (inside, refused)
    host = racing_box.host("box").host
    assert isinstance(host, ContainerHost) and host.programs.starts == 1


@pytest.fixture(params=["local", "ssh"])
def bare_box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolContext]:
    """A container whose image has no Python (a CUDA or distroless base): the same tree with
    the interpreter deleted in the container's own overlay layer."""
    rootfs = need_podman()
    with Containers() as boxes:
        name = boxes.run(rootfs, ["sleep", "infinity"])
        script = (
            f"rm -f /usr/bin/python3 /usr/bin/python3.11 && mkdir -p {WORKSPACE} && "
            f"echo {ONLY_HERE} > {WORKSPACE}/only-here.txt && ln -s /etc {WORKSPACE}/to-etc"
        )
        boxes.exec(name, ["sh", "-c", script])
        ctx = box_context(name, via(request, tmp_path), roots=[WORKSPACE])
        yield ctx
        ctx.close()


def test_a_container_without_python_is_read_with_posix_tools(bare_box: ToolContext) -> None:
    host = bare_box.host("box").host
    assert isinstance(host, ContainerHost)
    facts = host.describe()
    assert facts.call_mode == "posix"
    assert any("python3 was not found on host 'box'" in w for w in facts.warnings), facts.warnings
    found = execute(bare_box, "grep", {"host": "box", "path": WORKSPACE, "pattern": ONLY_HERE})
    assert found.ok and found.data["files"] == [f"{WORKSPACE}/only-here.txt"], found
    lines = execute(bare_box, "read_lines", {"host": "box", "path": f"{WORKSPACE}/only-here.txt"})
    assert lines.ok and ONLY_HERE in lines.output
    out = execute(bare_box, "read_lines", {"host": "box", "path": f"{WORKSPACE}/to-etc/passwd"})
    assert not out.ok and "outside the roots" in str(out.error)
    env = execute(bare_box, "python_env", {"host": "box"})
    assert not env.ok and "python3 is not available" in str(env.error), env.error
    assert "python3: command not found in container podman:" in str(env.error)
    assert "the file tools (read_lines, grep" in str(env.error)  # and what still works


def test_a_container_replaced_under_its_name_is_never_read_as_the_first(tmp_path: Path) -> None:
    """The session pins the container's id: a new container given the same name mid-session
    is reported, and its files never come back under the record of the first."""
    rootfs = need_podman()
    with Containers() as boxes:
        name = boxes.run(rootfs, ["sleep", "infinity"])
        boxes.exec(name, ["sh", "-c", f"mkdir -p {WORKSPACE} && echo first > {WORKSPACE}/who"])
        ctx = box_context(name, via_host("local", None, tmp_path), roots=[WORKSPACE])
        try:
            first = execute(ctx, "read_lines", {"host": "box", "path": f"{WORKSPACE}/who"})
            assert first.ok and "first" in first.output
            podman("rm", "--force", "--time=0", name)
            boxes.run(rootfs, ["sleep", "infinity"], name=name)
            boxes.exec(name, ["sh", "-c", f"mkdir -p {WORKSPACE} && echo second > {WORKSPACE}/who"])
            for tool in ("read_lines", "grep"):
                args = {"path": f"{WORKSPACE}/who", **({"pattern": "."} if tool == "grep" else {})}
                later = execute(ctx, tool, {"host": "box", **args})
                assert "second" not in later.output + str(later.error) + json.dumps(later.data)
                assert not later.ok, later.output
            host = ctx.host("box").host
            assert isinstance(host, ContainerHost)
            with pytest.raises(HostError, match="replaced or removed"):
                host.facts()
        finally:
            ctx.close()


def test_a_container_restarted_mid_session_is_reported_not_read_as_the_same_run(
    tmp_path: Path,
) -> None:
    """A restart keeps the container's id and name, so the pinned id does not tell it: the
    run it began reading is remembered, and once the program has to start again in a new run
    of the container, every later answer is the restart, said as such."""
    rootfs = need_podman()
    with Containers() as boxes:
        name = boxes.run(rootfs, ["sleep", "infinity"])
        boxes.exec(name, ["sh", "-c", f"mkdir -p {WORKSPACE} && echo before > {WORKSPACE}/who"])
        ctx = box_context(name, via_host("local", None, tmp_path), roots=[WORKSPACE])
        try:
            args = {"host": "box", "path": f"{WORKSPACE}/who"}
            first = execute(ctx, "read_lines", args)
            assert first.ok and "before" in first.output
            podman("restart", "--time=0", name)
            for _ in range(2):  # the first call that meets the restart, and every one after
                later = execute(ctx, "read_lines", args)
                assert not later.ok, later.output
                assert "restarted during this session" in str(later.error), later.error
        finally:
            ctx.close()
