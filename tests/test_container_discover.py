"""Discovery (issue 40, item 4): `sleuth hosts --discover HOST` and list_containers on a host
with three real podman containers (one engine, two others) list all three, mark the engine,
and print sleuth.toml lines that make each a host, which then work."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import checkpoint_fixtures as fx
from tests.container_support import SITE, fake_site, need_podman
from tests.containers import Containers, own_storage
from tests.sshd import SSHServer, free_port, missing_reason
from tests.test_cli_tools import sleuth

pytestmark = pytest.mark.ssh


@dataclass
class GpuBox:
    """A via host (the test sshd) whose podman holds exactly three containers."""

    sshd: SSHServer
    engine: str
    others: list[str]


@pytest.fixture(scope="module")
def gpu_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuBox]:
    rootfs = need_podman()
    if (why := missing_reason()) is not None:
        pytest.skip(why)
    here = tmp_path_factory.mktemp("discover")
    storage = own_storage(here / "storage")
    fx.tiny_deepseek_mtp(here / "models" / "tiny")
    site = fake_site(here / "site")
    python_dir = os.path.dirname(os.path.realpath(sys.executable))
    server = SSHServer(
        dir=here / "sshd",
        port=free_port(),
        extra_config=[
            f"SetEnv HOME={here / 'sshd' / 'home'} PATH={python_dir}:/usr/local/bin:/usr/bin:/bin"
            f" CONTAINERS_STORAGE_CONF={storage}"
        ],
    )
    (here / "sshd").mkdir()
    server._write_files()
    server.start()
    try:
        with Containers(storage) as boxes:
            engine = boxes.run(
                rootfs,
                ["python3", "-m", "sglang.launch_server", "--model-path", "/models/tiny"],
                volumes={"/models": here / "models", SITE: site},
                name="sglang-0",
            )
            others = [
                boxes.run(rootfs, ["sleep", "infinity"], name="sidecar"),
                boxes.run(rootfs, ["sh", "-c", "echo done"], name="batch-job", detach=False),
            ]
            yield GpuBox(server, engine, others)
    finally:
        server.stop()


def write_config(folder: Path, box: GpuBox, extra: str = "") -> None:
    (folder / "sleuth.toml").write_text(
        f'known_hosts = "{folder}/sleuth_known_hosts"\n\n'
        f'[hosts.gpu1]\nssh = "{box.sshd.alias}"\n\n{extra}'
    )


def test_discover_lists_the_three_containers_and_marks_the_engine(
    gpu_box: GpuBox, tmp_path: Path
) -> None:
    write_config(tmp_path, gpu_box)
    args = [
        "hosts",
        "--discover",
        "gpu1",
        "--runtime",
        "podman",
        "--no-sign",
        "--transcripts",
        "tr",
    ]
    done = sleuth([*args, "--json"], tmp_path, gpu_box.sshd.home)
    assert done.returncode == 0, done.stderr + done.stdout
    listing = json.loads(done.stdout)["data"]
    by_name = {c["name"]: c for c in listing["containers"]}
    assert sorted(by_name) == ["batch-job", "sglang-0", "sidecar"]
    assert by_name["sglang-0"]["engine"] == "sglang"
    assert by_name["sidecar"]["engine"] is None and by_name["batch-job"]["engine"] is None
    assert by_name["sglang-0"]["state"] == "running"
    assert by_name["batch-job"]["state"] in ("exited", "stopped")  # podman 4.3 says stopped
    assert by_name["sglang-0"]["command"][:3] == ["python3", "-m", "sglang.launch_server"]
    mounts = {m["destination"]: m for m in by_name["sglang-0"]["mounts"]}
    assert mounts["/models"]["checkpoint"] and not mounts[SITE]["checkpoint"]
    text = sleuth(args, tmp_path, gpu_box.sshd.home)
    assert text.returncode == 0, text.stderr
    assert "3 containers on gpu1 (podman), 1 running an inference engine" in text.stdout
    assert "- sglang-0: running  [engine: sglang]" in text.stdout


def test_the_printed_lines_make_the_engine_a_working_host(gpu_box: GpuBox, tmp_path: Path) -> None:
    write_config(tmp_path, gpu_box)
    args = ["tool", "list_containers", "runtime=podman", "--host", "gpu1", "--json", "--no-sign"]
    done = sleuth([*args, "--transcripts", "tr"], tmp_path, gpu_box.sshd.home)
    assert done.returncode == 0, done.stderr
    toml = "\n".join(json.loads(done.stdout)["data"]["toml"])
    assert '[hosts.sglang-0]\nvia = "gpu1"\nruntime = "podman"\ncontainer = "sglang-0"' in toml
    write_config(tmp_path, gpu_box, toml)
    args = ["tool", "list_dir", "path=/models/tiny", "--host", "sglang-0", "--json", "--no-sign"]
    listed = sleuth([*args, "--transcripts", "tr"], tmp_path, gpu_box.sshd.home)
    assert listed.returncode == 0, listed.stderr + listed.stdout
    names = {e["name"] for e in json.loads(listed.stdout)["data"]["entries"]}
    assert "config.json" in names


def test_a_group_of_container_hosts_is_one_fleet_question(gpu_box: GpuBox, tmp_path: Path) -> None:
    """ "Do all these containers run the same sglang?": python_env over a group of two container
    hosts answers per container, grouped by answer: the engine has sglang, the sidecar none."""
    boxes = "".join(
        f'[hosts.box-{name}]\nvia = "gpu1"\ncontainer = "{name}"\nruntime = "podman"\n'
        f'roots = ["{SITE}"]\n\n'
        for name in ("sglang-0", "sidecar")
    )
    write_config(tmp_path, gpu_box, boxes + '[groups]\nboxes = ["box-*"]\n')
    args = ["tool", "python_env", "--hosts", "boxes", "--json", "--no-sign"]
    done = sleuth([*args, "--transcripts", "tr"], tmp_path, gpu_box.sshd.home)
    assert done.returncode == 0, done.stderr + done.stdout
    answers = {}
    for group in json.loads(done.stdout)["data"]["groups"]:
        assert group["verdict"] not in ("failed", "unreachable"), group
        sglang = next(p for p in group["data"]["packages"] if p["name"] == "sglang")
        for host in group["hosts"]:
            answers[host] = sglang["version"] if sglang["installed"] else None
    assert answers == {"box-sglang-0": "0.5.4.post9", "box-sidecar": None}
