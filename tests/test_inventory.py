"""`[groups] from_inventory` (issue 40, item 5): Ansible inventories (INI, YAML, and the JSON
of `ansible-inventory --list`) read as the real `ansible-inventory` (Debian's ansible-core)
reads the same files, and their groups become Sleuth's groups."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sleuth.config import ConfigError, load_settings
from sleuth.config.inventory import KEPT, inventory_listing
from tests.sshd import SSHServer
from tests.test_cli_tools import sleuth

INI = """\
lonely.example ansible_user=ops

[decode]
gpu-d[01:03] ansible_user=serve
gpu-d10:2222

[prefill]
gpu-p[a:b].lab ansible_host=10.1.0.7 ansible_port=2201

[prefill:vars]
ansible_user=prefill-admin
ansible_port=2299

[serving:children]
decode
prefill

[serving:vars]
ansible_user=fleet

[all:vars]
ansible_port=22
"""

YAML = """\
all:
  vars:
    ansible_user: root
  hosts:
    bastion:
      ansible_host: 192.0.2.10
  children:
    serving:
      vars:
        ansible_port: 2022
      children:
        decode:
          hosts:
            node-[1:3]:
          vars:
            ansible_user: decode
        prefill:
          hosts:
            node-3:
              ansible_port: 2200
            pf-[a:c]:
"""


def ansible_list(path: Path) -> dict[str, Any]:
    if shutil.which("ansible-inventory") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI must compare with the real ansible-inventory (apt-get install ansible-core)"
            )
        pytest.skip("ansible-inventory is missing: apt-get install -y ansible-core")
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(path.parent / "ansible-tmp"),
           "ANSIBLE_HOME": str(path.parent / "ansible-home")}  # fmt: skip
    done = subprocess.run(
        ["ansible-inventory", "-i", str(path), "--list"],
        capture_output=True, text=True, check=True, env=env, timeout=120,
    )  # fmt: skip
    listing: dict[str, Any] = json.loads(done.stdout)
    return listing


def normal(listing: dict[str, Any]) -> dict[str, Any]:
    """Groups' direct hosts and children as sets, and the connection variables of each host
    (a port is a number whichever way it was written)."""
    groups = {
        name: (set(entry.get("hosts", [])), set(entry.get("children", [])))
        for name, entry in listing.items()
        if name != "_meta" and (entry.get("hosts") or entry.get("children"))
    }
    hostvars = {
        host: {k: (int(v) if k == "ansible_port" else v) for k, v in got.items() if k in KEPT}
        for host, got in listing["_meta"]["hostvars"].items()
    }
    return {"groups": groups, "hostvars": hostvars}


@pytest.mark.parametrize(("name", "text"), [("inventory.ini", INI), ("inventory.yml", YAML)])
def test_an_inventory_is_read_as_ansible_inventory_reads_it(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    ours, theirs = normal(inventory_listing(path)), normal(ansible_list(path))
    assert ours == theirs
    assert len(ours["hostvars"]) >= 6  # ranges expanded, every host there


def test_an_inventorys_groups_are_sleuths_groups_in_each_form(tmp_path: Path) -> None:
    (tmp_path / "inventory.ini").write_text(INI)
    (tmp_path / "listed.json").write_text(json.dumps(ansible_list(tmp_path / "inventory.ini")))
    forms = {}
    for source in ("inventory.ini", "listed.json"):
        (tmp_path / "sleuth.toml").write_text(
            f'[groups]\nfrom_inventory = "{source}"\nfrom_inventory_roots = ["/models"]\n'
        )
        settings = load_settings(cwd=tmp_path)
        forms[source] = (
            {n: sorted(g.hosts) for n, g in settings.groups.items()},
            {n: (h.ssh, h.roots) for n, h in settings.hosts.items() if n != "local"},
        )
    assert forms["inventory.ini"] == forms["listed.json"]
    groups, hosts = forms["inventory.ini"]
    assert groups["serving"] == sorted(
        ["gpu-d01", "gpu-d02", "gpu-d03", "gpu-d10", "gpu-pa.lab", "gpu-pb.lab"]
    )
    assert hosts["gpu-d02"] == ("serve@gpu-d02:22", ["/models"])  # inline user, all's port
    assert hosts["gpu-d10"] == ("fleet@gpu-d10:2222", ["/models"])  # host:port, parent's user
    assert hosts["gpu-pa.lab"] == ("prefill-admin@10.1.0.7:2201", ["/models"])
    assert hosts["lonely.example"] == ("ops@lonely.example:22", ["/models"])


def test_a_group_in_both_places_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "inventory.ini").write_text(INI)
    (tmp_path / "sleuth.toml").write_text(
        '[groups]\nfrom_inventory = "inventory.ini"\ndecode = ["gpu-d*"]\n'
    )
    with pytest.raises(ConfigError, match=r"group `decode` is in sleuth.toml and in"):
        load_settings(cwd=tmp_path)
    (tmp_path / "sleuth.toml").write_text('[groups]\nfrom_inventory = "nowhere.yml"\n')
    with pytest.raises(ConfigError, match=r"sleuth.toml:2: cannot read inventory"):
        load_settings(cwd=tmp_path)


@pytest.mark.ssh
def test_a_fleet_call_reaches_an_inventorys_group(tmp_path: Path, sshd: SSHServer) -> None:
    """Two inventory hosts that are the test sshd by address, port and user."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f.txt").write_text("same on every node\n")
    (tmp_path / "inventory.yml").write_text(
        "all:\n  children:\n    decode:\n      hosts:\n        node-[1:2]:\n"
        f"      vars:\n        ansible_host: 127.0.0.1\n        ansible_port: {sshd.port}\n"
        f"        ansible_user: {sshd.user}\n"
    )
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/known"\n[groups]\nfrom_inventory = "inventory.yml"\n'
        f'from_inventory_roots = ["{tmp_path / "data"}"]\n'
    )
    args = ["tool", "read_lines", f"path={tmp_path / 'data' / 'f.txt'}", "--hosts", "decode"]
    done = sleuth([*args, "--json", "--no-sign", "--transcripts", "tr"], tmp_path, sshd.home)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "node-1" in done.stdout and "node-2" in done.stdout
    assert "same on every node" in done.stdout
