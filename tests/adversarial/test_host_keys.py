"""Host keys: unknown, changed and revoked keys are all refused, `--accept-new-host-key`
or not, and through `sleuth tool` as a user would meet them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sleuth.hosts.ssh import HostKeyError, SSHHost
from tests.sshd import SSHServer, keygen

from . import figures


def server_line(sshd: SSHServer, names: str, key_pub: Path | None = None) -> str:
    key_type, blob = Path(key_pub or str(sshd.host_key_path) + ".pub").read_text().split()[:2]
    return f"{names} {key_type} {blob}\n"


def known_hosts(sshd: SSHServer, tmp_path: Path, case: str) -> Path:
    name = f"[127.0.0.1]:{sshd.port}"
    path = tmp_path / "known_hosts"
    if case == "unknown":
        path.write_text("")
    elif case == "changed":
        keygen(tmp_path / "other")
        path.write_text(server_line(sshd, name, tmp_path / "other.pub"))
    else:
        path.write_text(server_line(sshd, name) + "@revoked " + server_line(sshd, "*"))
    return path


@pytest.mark.ssh
@pytest.mark.parametrize(
    ("case", "accept_new"),
    # An unknown key with accept-new is stored by design (tests/test_host_keys.py).
    [
        ("unknown", False),
        ("changed", False),
        ("changed", True),
        ("revoked", False),
        ("revoked", True),
    ],
)
def test_bad_host_keys_are_refused(
    sshd: SSHServer, tmp_path: Path, case: str, accept_new: bool
) -> None:
    figures.touch("host_keys_accepted")
    host = SSHHost(
        "remote",
        sshd.alias,
        known_hosts=tmp_path / "sleuth_known_hosts",
        ssh_config_path=sshd.ssh_config_path,
        user_known_hosts=known_hosts(sshd, tmp_path, case),
        accept_new=accept_new,
    )
    try:
        with pytest.raises(HostKeyError) as caught:
            host.run(["true"], timeout=5, max_bytes=10)
    finally:
        host.close()
    figures.count("host_keys_accepted", int(caught.value is None))
    assert sshd.host_key_fingerprint in str(caught.value)
    assert not (tmp_path / "sleuth_known_hosts").exists()


@pytest.mark.ssh
@pytest.mark.parametrize("case", ["unknown", "changed", "revoked"])
def test_the_cli_refuses_bad_host_keys_and_runs_nothing(
    sshd: SSHServer, tmp_path: Path, case: str
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    user_known = home / ".ssh" / "known_hosts"
    user_known.write_text(known_hosts(sshd, tmp_path, case).read_text())
    config = sshd.ssh_config_path.read_text().replace(str(sshd.known_hosts_path), str(user_known))
    (home / ".ssh" / "config").write_text(config)
    (tmp_path / "sleuth.toml").write_text(
        f'[hosts.remote]\nssh = "{sshd.alias}"\nroots = ["{tmp_path}"]\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "tool", "list_dir", "path=.", "--host", "remote"],
        cwd=tmp_path,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    figures.count("host_keys_accepted", int(run.returncode == 0))
    assert run.returncode != 0
    said = " ".join((run.stdout + run.stderr).split())
    assert sshd.host_key_fingerprint in said
    assert "sleuth.toml" not in run.stdout  # nothing was listed
