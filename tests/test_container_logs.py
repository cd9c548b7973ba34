"""diagnose_log on a container's own log (issue 40, item 3): a container that exited with a
real engine failure gives the same diagnosis as the same log read as a file, locally, through
the test sshd, and from `sleuth diagnose --host H --container-log`.

The log is tests/fixtures/engine_logs/056-sglang-oom_weights.log, from
https://github.com/sgl-project/sglang/issues/5576 (as that folder's index.json says).
The container writes its lines alternately to stdout and stderr, as an engine's logger and
its tracebacks do, and the tool must put them back in order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.calls import execute
from sleuth.hosts.container.host import ContainerHost
from sleuth.tools.context import ToolContext
from tests.container_support import box_context, need_podman, via_host
from tests.containers import Containers
from tests.sshd import SSHServer
from tests.test_cli_tools import sleuth

pytestmark = pytest.mark.ssh

LOGS = Path(__file__).parent / "fixtures" / "engine_logs"
LOG = "056-sglang-oom_weights.log"
WRITER = (
    "import sys, time\n"
    "for i, line in enumerate(open('/log/engine.log', encoding='utf-8')):\n"
    "    out = sys.stderr if i % 2 else sys.stdout\n"
    "    out.write(line); out.flush(); time.sleep(0.003)\n"
    "sys.exit(1)\n"
)


def url_of(name: str) -> str:
    entry = next(e for e in json.loads((LOGS / "index.json").read_text()) if e["file"] == name)
    return str(entry["url"])


@pytest.fixture(scope="module")
def exited_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A container whose engine printed the real failure log and exited 1."""
    rootfs = need_podman()
    here = tmp_path_factory.mktemp("log")
    (here / "engine.log").write_bytes((LOGS / LOG).read_bytes())
    (here / "writer.py").write_text(WRITER)
    with Containers() as boxes:
        name = boxes.run(rootfs, ["python3", "/log/writer.py"], volumes={"/log": here})
        boxes.wait(name)
        yield name


@pytest.fixture(params=["local", "ssh"])
def ctx(
    request: pytest.FixtureRequest, exited_engine: str, tmp_path: Path
) -> Iterator[ToolContext]:
    sshd: SSHServer | None = None
    if request.param == "ssh":
        sshd = request.getfixturevalue("sshd")
    context = box_context(exited_engine, via_host(request.param, sshd, tmp_path))
    context.hosts["local"].config.roots = [str(LOGS)]
    yield context
    context.close()


def diagnosis(ctx: ToolContext, host: str, **args: Any) -> dict[str, Any]:
    result = execute(ctx, "diagnose_log", {"host": host, **args})
    assert result.ok, result.error
    found: dict[str, Any] = result.data["diagnosis"]
    return found


def test_an_exited_containers_log_is_diagnosed_as_the_file_is(ctx: ToolContext) -> None:
    assert url_of(LOG).startswith("https://github.com/")
    as_file = diagnosis(ctx, "local", path=str(LOGS / LOG))
    from_container = diagnosis(ctx, "box", container_log=True)
    assert as_file["kind"] == "oom_weights"
    assert from_container == as_file
    host = ctx.host("box").host
    assert isinstance(host, ContainerHost)
    text, _ = host.logs(2000)
    assert text == (LOGS / LOG).read_text()  # stdout and stderr back in the order written


def test_previous_is_for_pods_and_container_log_for_container_hosts(ctx: ToolContext) -> None:
    result = execute(ctx, "diagnose_log", {"host": "box", "container_log": True, "previous": True})
    assert not result.ok and "keeps one log across restarts" in str(result.error)
    result = execute(ctx, "diagnose_log", {"host": "local", "container_log": True})
    assert not result.ok and "is not a container or pod host" in str(result.error)
    result = execute(ctx, "diagnose_log", {"host": "box", "previous": True, "path": "/x"})
    assert not result.ok and "set container_log=true" in str(result.error)


def test_sleuth_diagnose_reads_a_containers_log(exited_engine: str, tmp_path: Path) -> None:
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.box]\nvia = "local"\ncontainer = "{exited_engine}"\nruntime = "podman"\n'
    )
    from_file = sleuth(["diagnose", str(LOGS / LOG), "--json"], tmp_path)
    args = ["diagnose", "--host", "box", "--container-log", "--json", "--no-sign"]
    from_box = sleuth([*args, "--transcripts", "tr"], tmp_path)
    assert from_file.returncode == 0 and from_box.returncode == 0, from_box.stderr
    assert json.loads(from_box.stdout)["diagnosis"] == json.loads(from_file.stdout)["diagnosis"]
    assert json.loads(from_box.stdout)["source"] == f"log of podman:{exited_engine}"
    assert len(list((tmp_path / "tr").glob("*.jsonl"))) == 1  # the read is on the record
    usage = sleuth(["diagnose", "--host", "box"], tmp_path)
    assert usage.returncode == 2 and "--container-log" in usage.stderr + usage.stdout


SERIES_LOG = Path(__file__).parent / "fixtures" / "live" / "sglang-decode.log"
"""SGLang decode lines with accept len (https://github.com/sgl-project/sgl-kernel-npu/pull/608,
as tests/fixtures/live/SOURCES.md says)."""


def test_engine_log_series_reads_a_containers_log_as_it_reads_the_file(
    tmp_path: Path, sshd: SSHServer
) -> None:
    """The engine's periodic lines, printed by the container to stdout and stderr, make the
    same series as the same lines read from a file: every point, and the summary's mean
    accept length over the window."""
    rootfs = need_podman()
    (tmp_path / "engine.log").write_bytes(SERIES_LOG.read_bytes())
    (tmp_path / "writer.py").write_text(WRITER.replace("sys.exit(1)", "sys.exit(0)"))
    with Containers() as boxes:
        name = boxes.run(rootfs, ["python3", "/log/writer.py"], volumes={"/log": tmp_path})
        boxes.wait(name)
        context = box_context(name, via_host("ssh", sshd, tmp_path))
        context.hosts["local"].config.roots = [str(SERIES_LOG.parent)]
        try:
            as_file = execute(
                context, "engine_log_series", {"host": "local", "path": str(SERIES_LOG)}
            )
            boxed = execute(context, "engine_log_series", {"host": "box", "container_log": True})
        finally:
            context.close()
    assert as_file.ok and boxed.ok, boxed.error
    assert boxed.data["source"] == f"log of podman:{name}"
    assert boxed.data["points"] == as_file.data["points"] and boxed.data["points"]
    assert boxed.data["summary"] == as_file.data["summary"]
    lengths = [f for f in boxed.data["summary"] if "accept" in f["name"] and "len" in f["name"]]
    assert lengths and lengths[0]["value"] is not None
