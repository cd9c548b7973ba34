"""`sleuth hosts --check` as a user runs it: storing a new host key, and a table that shows
the key type and the whole fingerprint even in a narrow terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sshd import SSHServer

pytestmark = pytest.mark.ssh


def sleuth(
    args: list[str], cwd: Path, home: Path, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path, sshd: SSHServer) -> Path:
    """A sleuth.toml naming the test server, and a HOME whose ssh config reaches it but whose
    known_hosts does not know its key."""
    (tmp_path / "sleuth.toml").write_text(
        f'known_hosts = "{tmp_path}/sleuth_known_hosts"\n\n'
        f'[hosts.gpu1]\nssh = "{sshd.alias}"\nroots = ["{tmp_path}"]\n'
    )
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        sshd.ssh_config_path.read_text().replace(
            str(sshd.known_hosts_path), str(home / ".ssh" / "known_hosts")
        )
    )
    return tmp_path


def gpu1(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    row: dict[str, object] = {r["name"]: r for r in json.loads(proc.stdout)}["gpu1"]
    return row


def test_accept_new_host_key_stores_the_key_and_the_next_check_passes(
    project: Path, sshd: SSHServer
) -> None:
    home = project / "home"
    refused = sleuth(["hosts", "--check", "--json"], project, home)
    assert refused.returncode == 1
    row = gpu1(refused)
    assert row["ok"] is False and row["error_kind"] == "host_key_unknown"
    assert sshd.host_key_fingerprint in str(row["error"])
    assert not (project / "sleuth_known_hosts").exists()
    accepted = sleuth(["hosts", "--check", "--accept-new-host-key", "--json"], project, home)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert gpu1(accepted)["host_key_fingerprint"] == sshd.host_key_fingerprint
    stored = (project / "sleuth_known_hosts").read_text()
    assert stored.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    again = sleuth(["hosts", "--check", "--json"], project, home)
    assert again.returncode == 0 and gpu1(again)["ok"] is True


def last_cells(table: str) -> str:
    """The text of the table's last column, line after line, joined."""
    cells = [line.rsplit("│", 2)[1].strip() for line in table.splitlines() if line.count("│") >= 3]
    return "".join(cells)


@pytest.mark.parametrize("columns", [80, 200])
def test_the_table_shows_key_type_and_the_full_fingerprint(
    project: Path, sshd: SSHServer, columns: int
) -> None:
    proc = sleuth(["hosts", "--check"], project, sshd.home, columns)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "…" not in proc.stdout
    shown = last_cells(proc.stdout)
    assert f"ED25519{sshd.host_key_fingerprint}" in shown.replace(" ", "")
