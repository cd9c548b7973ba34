"""Fixtures for container hosts: a real podman container with a fake engine, a checkpoint
and a fake `sglang` package inside, reached locally and through the test sshd."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sleuth.config import HostConfig, Limits
from sleuth.hosts.container.host import ContainerHost
from sleuth.hosts.host import Host, LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.context import ToolContext
from tests import checkpoint_fixtures as fx
from tests.containers import Containers, debian_rootfs, missing_reason
from tests.sshd import SSHServer

SITE = "/usr/local/lib/python3.11/dist-packages"
WORKSPACE = "/sgl-workspace"
ROOTS = [WORKSPACE, "/models", SITE]
SGLANG_VERSION = "0.5.4.post9"
ONLY_HERE = "marker-only-in-the-container-3f9c"
SHM = "96m"


def need_podman() -> Path:
    """The rootfs; a skip where podman cannot run, but a failure in CI."""
    why = missing_reason()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the container tests: {why}")
        pytest.skip(why)
    return debian_rootfs()


def fake_site(folder: Path) -> Path:
    """A `sglang` package with its version and launch_server, as an engine image holds it."""
    pkg = folder / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f'__version__ = "{SGLANG_VERSION}"\n')
    (pkg / "launch_server.py").write_text(
        "import sys, time\nprint('fake sglang server', sys.argv[1:], flush=True)\n"
        "while True:\n    time.sleep(60)\n"
    )
    info = folder / f"sglang-{SGLANG_VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: sglang\nVersion: {SGLANG_VERSION}\n"
    )
    (info / "top_level.txt").write_text("sglang\n")
    return folder


@dataclass
class EngineBox:
    """One running container: the fake engine serving a real checkpoint."""

    name: str
    checkpoint: Path
    """On this machine; mounted at /models/tiny in the container."""


@pytest.fixture(scope="module")
def engine_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineBox]:
    rootfs = need_podman()
    here = tmp_path_factory.mktemp("box")
    fx.tiny_deepseek_mtp(here / "models" / "tiny")
    fx.shaped_checkpoint(here / "models" / "llama", fx.LLAMA3_70B, fx.llama3_70b_tensors())
    site = fake_site(here / "site")
    with Containers() as boxes:
        name = boxes.run(
            rootfs,
            ["python3", "-m", "sglang.launch_server", "--model-path", "/models/tiny"],
            volumes={"/models": here / "models", SITE: site},
            extra=[f"--shm-size={SHM}"],
        )
        script = (
            f"mkdir -p {WORKSPACE}/sub && echo {ONLY_HERE} > {WORKSPACE}/only-here.txt && "
            f"ln -s /etc {WORKSPACE}/to-etc && ln -s /etc/passwd {WORKSPACE}/sub/passwd && "
            f"echo not-in-roots > /secret-outside.txt"
        )
        boxes.exec(name, ["sh", "-c", script])
        yield EngineBox(name, here / "models" / "tiny")


def container_config(name: str, via: str, **extra: object) -> HostConfig:
    return HostConfig.model_validate(
        {"via": via, "container": name, "runtime": "podman", "roots": ROOTS, **extra}
    )


def via_host(kind: str, sshd: SSHServer | None, tmp_path: Path) -> Host:
    if kind == "local":
        return LocalHost("local")
    from sleuth.hosts.ssh import SSHHost

    assert sshd is not None
    if sshd.process is None:
        sshd.start()
    return SSHHost(
        "gpu1",
        sshd.alias,
        known_hosts=tmp_path / "sleuth_known_hosts",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=sshd.known_hosts_path,
    )


def box_context(box: str, via: Host, **extra: object) -> ToolContext:
    config = container_config(box, via.name, **extra)
    host = ContainerHost("box", via, config)
    local = SandboxedHost("local", LocalHost(), HostConfig(roots=["/tmp"]), Limits())
    sandboxed = SandboxedHost("box", host, config, Limits())
    return ToolContext(hosts={"local": local, "box": sandboxed})
