"""A test fleet: SSH aliases to the test sshd, each host with its own root tree, and drifts.

```python
fleet = build_fleet(tmp_dir, sshd)          # 16 hosts that answer, 1 that cannot be reached
fleet.config                                # its sleuth.toml: [groups] fleet = ["gpu-*"]
fleet.home                                  # HOME whose ~/.ssh/config names gpu-01 ... gpu-17
fleet.drifts                                # what was planted on which host
fleet.stop()                                # the dummy servers go
```

One sshd serves every alias (each alias is its own SSH connection, and each host its own
root tree under a different mount point); that is what a fleet call sees of a real fleet:
separate connections, separate roots, separate processes. Every host is a copy of one
template: a checkpoint (real safetensors shards), a Python environment with a fake
`sglang` distribution (a dist-info `python_env` reads, and a `sglang.launch_server` that only
sleeps), and a running "server" started with that environment and a distinctive argv. Then
three drifts are planted: one host's checkpoint has a different shard, one has another
sglang version, one server runs with an extra flag. The last alias points at a closed port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from tests.checkpoint_fixtures import Spec, write_config, write_index, write_safetensors
from tests.sshd import SSHServer, free_port

GROUP = "fleet"
MODEL = "models/tiny-llama"
SGLANG = "0.4.6.post1"
DRIFT_SGLANG = "0.4.7"
FLAGS = ["--tp-size", "1", "--mem-fraction-static", "0.85", "--port", "30000"]
DRIFT_FLAG = "--disable-cuda-graph"
SHARD_2 = "model-00002-of-00002.safetensors"
TENSORS: dict[str, dict[str, Spec]] = {
    "model-00001-of-00002.safetensors": {
        "model.embed_tokens.weight": ("BF16", [64, 16]),
        "model.layers.0.self_attn.q_proj.weight": ("BF16", [16, 16]),
    },
    SHARD_2: {
        "model.layers.1.self_attn.q_proj.weight": ("BF16", [16, 16]),
        "lm_head.weight": ("BF16", [64, 16]),
    },
}
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 16,
    "vocab_size": 64,
    "torch_dtype": "bfloat16",
}
LAUNCH_SERVER = "import time\nwhile True:\n    time.sleep(3600)\n"


@dataclass
class Fleet:
    dir: Path
    home: Path
    config: Path
    hosts: list[str]
    """Every host, in order; the last cannot be reached."""
    roots: dict[str, Path]
    drifts: dict[str, str]
    """kind (checkpoint, version, flag) -> the host it was planted on."""
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def unreachable(self) -> str:
        return self.hosts[-1]

    @property
    def reachable(self) -> list[str]:
        return self.hosts[:-1]

    def stop(self) -> None:
        for server in self.servers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=5)
        self.servers.clear()


def build_fleet(base: Path, sshd: SSHServer, count: int = 16) -> Fleet:
    """`count` hosts that answer plus one that cannot be reached, with the three drifts."""
    names = [f"gpu-{i:02d}" for i in range(1, count + 2)]
    drifts = {"checkpoint": names[4], "version": names[8], "flag": names[11]}
    template = _template(base / "template")
    roots: dict[str, Path] = {}
    for i, name in enumerate(names):
        # The same tree under different mount points, as fleets keep it.
        mount = base / ("srv" if i % 2 else "mnt/nvme0/data")
        roots[name] = mount / name
        if name != names[-1]:
            shutil.copytree(template, roots[name], symlinks=True)
    _plant(roots, drifts)
    fleet = Fleet(base, base / "home", base / "sleuth.toml", names, roots, drifts)
    _ssh_home(fleet, sshd)
    _sleuth_toml(fleet)
    for name in fleet.reachable:
        extra = [DRIFT_FLAG] if name == drifts["flag"] else []
        fleet.servers.append(_server(roots[name], extra))
    return fleet


def _template(root: Path) -> Path:
    model = root / MODEL
    model.mkdir(parents=True)
    write_config(model, CONFIG)
    for seed, (shard, tensors) in enumerate(TENSORS.items()):
        write_safetensors(model / shard, tensors, metadata={"format": "pt"}, seed=seed)
    write_index(model, TENSORS)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
        check=True,
        capture_output=True,
    )
    site = _site_packages(root / "venv")
    (site / "sglang").mkdir()
    (site / "sglang" / "__init__.py").write_text(f'__version__ = "{SGLANG}"\n')
    (site / "sglang" / "launch_server.py").write_text(LAUNCH_SERVER)
    _dist_info(site, SGLANG)
    return root


def _site_packages(venv: Path) -> Path:
    version = sysconfig.get_python_version()
    return venv / "lib" / f"python{version}" / "site-packages"


def _dist_info(site: Path, version: str) -> None:
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    (info / "top_level.txt").write_text("sglang\n")


def _plant(roots: dict[str, Path], drifts: dict[str, str]) -> None:
    # A shard re-exported in F32: another file where the others have the BF16 one.
    changed = {k: ("F32", shape) for k, (_, shape) in TENSORS[SHARD_2].items()}
    write_safetensors(
        roots[drifts["checkpoint"]] / MODEL / SHARD_2, changed, metadata={"format": "pt"}, seed=1
    )
    site = _site_packages(roots[drifts["version"]] / "venv")
    shutil.rmtree(site / f"sglang-{SGLANG}.dist-info")
    _dist_info(site, DRIFT_SGLANG)


def _ssh_home(fleet: Fleet, sshd: SSHServer) -> None:
    ssh = fleet.home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    shutil.copy(sshd.known_hosts_path, ssh / "known_hosts")
    closed = free_port()
    blocks = []
    for name in fleet.hosts:
        port = closed if name == fleet.unreachable else sshd.port
        blocks.append(
            f"Host {name}\n    HostName {sshd.host}\n    Port {port}\n    User {sshd.user}\n"
            f"    IdentityFile {sshd.client_key_path}\n    IdentitiesOnly yes\n"
        )
    (ssh / "config").write_text("\n".join(blocks))


def _sleuth_toml(fleet: Fleet) -> None:
    lines = [
        f'known_hosts = "{fleet.dir}/sleuth_known_hosts"',
        "",
        "[groups]",
        f'{GROUP} = ["gpu-*"]',
    ]
    for name in fleet.hosts:
        root = fleet.roots[name]
        lines += [
            "",
            f"[hosts.{name}]",
            f'ssh = "{name}"',
            f'roots = ["{root}"]',
            f'python = "{root}/venv/bin/python3"',
        ]
    fleet.config.write_text("\n".join(lines) + "\n")


def _server(root: Path, extra: list[str]) -> subprocess.Popen[bytes]:
    argv = [
        str(root / "venv" / "bin" / "python3"),
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(root / MODEL),
        *FLAGS,
        *extra,
    ]
    return subprocess.Popen(
        argv, cwd=root, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
