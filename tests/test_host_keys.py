"""Host keys, authentication and addressing against a real sshd: what is refused and why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sleuth.errors import ErrorKind
from sleuth.hosts.host import HostError
from sleuth.hosts.ssh import HostKeyError, SSHHost, read_known_hosts
from tests.sshd import SSHServer, free_port, keygen


def _host(sshd: SSHServer, user_known: Path, sleuth_known: Path, **kw: object) -> SSHHost:
    return SSHHost(
        "remote",
        str(kw.pop("target", sshd.alias)),
        known_hosts=sleuth_known,
        ssh_config_path=Path(str(kw.pop("config", sshd.ssh_config_path))),
        user_known_hosts=user_known,
        **kw,  # type: ignore[arg-type]
    )


def _server_key_line(sshd: SSHServer, names: str) -> str:
    key_type, blob = Path(str(sshd.host_key_path) + ".pub").read_text().split()[:2]
    return f"{names} {key_type} {blob}\n"


def _connect(host: SSHHost) -> None:
    try:
        host.stat("/")
    finally:
        host.close()


def test_unknown_key_is_refused_with_its_fingerprint_and_the_fix(
    sshd: SSHServer, tmp_path: Path
) -> None:
    sleuth_known = tmp_path / "sleuth_known_hosts"
    with pytest.raises(HostKeyError) as caught:
        _connect(_host(sshd, tmp_path / "empty", sleuth_known))
    message = str(caught.value)
    assert f"ED25519 key {sshd.host_key_fingerprint}" in message
    assert "--accept-new-host-key" in message and str(sleuth_known) in message
    assert caught.value.kind is ErrorKind.HOST_KEY_UNKNOWN
    assert not sleuth_known.exists()


def test_accept_new_stores_the_key_and_the_next_connection_passes(
    sshd: SSHServer, tmp_path: Path
) -> None:
    sleuth_known = tmp_path / "config" / "known_hosts"
    _connect(_host(sshd, tmp_path / "empty", sleuth_known, accept_new=True))
    assert sleuth_known.read_text() == _server_key_line(sshd, f"[127.0.0.1]:{sshd.port}")
    _connect(_host(sshd, tmp_path / "empty", sleuth_known))
    assert len(sleuth_known.read_text().splitlines()) == 1


def test_changed_key_is_refused_even_with_accept_new(sshd: SSHServer, tmp_path: Path) -> None:
    old_fingerprint = keygen(tmp_path / "old_key")
    key_type, blob = (tmp_path / "old_key.pub").read_text().split()[:2]
    user_known = tmp_path / "known_hosts"
    user_known.write_text(f"# header\n[127.0.0.1]:{sshd.port} {key_type} {blob}\n")
    with pytest.raises(HostKeyError) as caught:
        _connect(_host(sshd, user_known, tmp_path / "sleuth_known", accept_new=True))
    message = str(caught.value)
    assert "CHANGED" in message
    assert old_fingerprint in message and sshd.host_key_fingerprint in message
    assert f"{user_known}:2" in message
    assert caught.value.kind is ErrorKind.HOST_KEY_CHANGED
    assert not (tmp_path / "sleuth_known").exists()


def test_revoked_key_is_refused_even_when_also_listed(sshd: SSHServer, tmp_path: Path) -> None:
    user_known = tmp_path / "known_hosts"
    user_known.write_text(
        _server_key_line(sshd, f"[127.0.0.1]:{sshd.port}")
        + "@revoked "
        + _server_key_line(sshd, "*")
    )
    with pytest.raises(HostKeyError, match="@revoked") as caught:
        _connect(_host(sshd, user_known, tmp_path / "sleuth_known"))
    assert f"{user_known}:2" in str(caught.value)
    assert caught.value.kind is ErrorKind.HOST_KEY_REVOKED


def test_hashed_known_hosts_entries_are_recognised(sshd: SSHServer, tmp_path: Path) -> None:
    user_known = tmp_path / "known_hosts"
    user_known.write_text(_server_key_line(sshd, f"[127.0.0.1]:{sshd.port}"))
    subprocess.run(["ssh-keygen", "-H", "-f", str(user_known)], check=True, capture_output=True)
    assert user_known.read_text().startswith("|1|")
    _connect(_host(sshd, user_known, tmp_path / "sleuth_known"))


def test_host_patterns_follow_openssh_rules(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(
        "gpu*,!gpu9 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==\n"
        "[gpu1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB==\n"
    )
    assert [k.line for k in read_known_hosts(known, "gpu1")] == [1]
    assert read_known_hosts(known, "gpu9") == []
    assert [k.line for k in read_known_hosts(known, "[gpu1]:2222")] == [2]
    assert read_known_hosts(known, "[gpu2]:2222") == []


def test_wrong_key_is_refused_naming_the_keys_tried(sshd: SSHServer, tmp_path: Path) -> None:
    keygen(tmp_path / "stranger")
    config = tmp_path / "config"
    text = sshd.ssh_config_path.read_text()
    config.write_text(text.replace(str(sshd.client_key_path), str(tmp_path / "stranger")))
    with pytest.raises(HostError, match="refused every key") as caught:
        _connect(_host(sshd, sshd.known_hosts_path, tmp_path / "sk", config=config))
    assert str(tmp_path / "stranger") in str(caught.value)
    assert "ssh-copy-id" in str(caught.value)


def test_user_at_host_port_target_and_refused_port(sshd: SSHServer, tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    shutil.copy(sshd.client_key_path, key)
    config = tmp_path / "config"
    config.write_text(f"Host *\n    IdentityFile {key}\n    IdentitiesOnly yes\n")
    target = f"{sshd.user}@127.0.0.1:{sshd.port}"
    host = _host(sshd, sshd.known_hosts_path, tmp_path / "sk", target=target, config=config)
    assert host.run(["echo", "ok"], timeout=10, max_bytes=10).stdout == b"ok\n"
    host.close()
    port = free_port()
    refused = _host(sshd, sshd.known_hosts_path, tmp_path / "sk", target=f"root@127.0.0.1:{port}")
    with pytest.raises(HostError, match=f"connection refused by 127.0.0.1:{port}"):
        _connect(refused)


def test_unresolvable_alias_points_at_the_ssh_config(sshd: SSHServer, tmp_path: Path) -> None:
    host = _host(sshd, sshd.known_hosts_path, tmp_path / "sk", target="nosuchalias.invalid")
    with pytest.raises(HostError, match="neither a Host in") as caught:
        _connect(host)
    assert str(sshd.ssh_config_path) in str(caught.value)


def test_proxy_jump_reaches_the_host_through_another(sshd: SSHServer, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        sshd.ssh_config_path.read_text()
        + f"\nHost behind\n    HostName 127.0.0.1\n    Port {sshd.port}\n"
        f"    User {sshd.user}\n    IdentityFile {sshd.client_key_path}\n"
        f"    ProxyJump {sshd.alias}\n"
    )
    host = _host(sshd, sshd.known_hosts_path, tmp_path / "sk", target="behind", config=config)
    try:
        assert host.run(["echo", "via"], timeout=10, max_bytes=10).stdout == b"via\n"
        assert host.describe().via == [sshd.alias]
    finally:
        host.close()
