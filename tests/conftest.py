"""Shared fixtures: a throwaway sshd on 127.0.0.1 and hosts and contexts connected to it.

- `sshd`: the server (see tests/sshd.py); skipped with the install command when sshd is absent.
- `sshd_no_sftp`: a second server without the SFTP subsystem (hardened hosts run so).
- `ssh_calls`: how an SSH host's file tools reach its files, "resident" (Sleuth's program
  resident on the host) or "exec" (that program run once per call); every test that uses an
  SSH host through the fixtures below runs in both.
- `ssh_host_factory(name="remote", roots=[...], allow=[...])`: a SandboxedHost over a connected
  SSHHost to it.
- `make_context(roots, allow=[], approver=deny_all)`: a ToolContext whose hosts "local"
  (LocalHost) and "remote" (SSHHost) share the same roots, so a tool can run on both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import pytest

from sleuth.config import HostConfig, Limits
from sleuth.hosts.host import LocalHost
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import Approver, deny_all
from sleuth.tools.context import ToolContext
from tests.sshd import SSHServer, missing_reason

SandboxFactory = Callable[..., SandboxedHost]
CALL_MODES = ["resident", "exec"]


@pytest.fixture(autouse=True)
def _own_state_and_no_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and each `sleuth` it starts) keeps its ledger in its own state directory,
    and signs only with the keys it sets up: never the person's ssh-agent or ledger."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = SSHServer.create(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sshd_no_sftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = SSHServer.create(tmp_path_factory.mktemp("sshd-no-sftp"), sftp=False)
    try:
        yield server
    finally:
        server.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses an SSH host through these fixtures runs in each call mode."""
    if "ssh_calls" in metafunc.fixturenames:
        metafunc.parametrize("ssh_calls", CALL_MODES, indirect=True, scope="session")


@pytest.fixture(scope="session")
def ssh_calls(request: pytest.FixtureRequest) -> str:
    """The call mode under test; "resident" for a test that asks for a host at run time
    (`request.getfixturevalue`), which cannot be parametrized."""
    mode: str = getattr(request, "param", "resident")
    return mode


@pytest.fixture
def ssh_host_factory(
    sshd: SSHServer, tmp_path: Path, ssh_calls: Literal["resident", "exec"]
) -> Iterator[SandboxFactory]:
    from sleuth.hosts.ssh import SSHHost

    made: list[SSHHost] = []

    def make(
        name: str = "remote", roots: Sequence[str] = (), allow: Sequence[str] = ()
    ) -> SandboxedHost:
        if sshd.process is None:  # a test stopped it; later tests still need it
            sshd.start()
        host = SSHHost(
            name,
            sshd.alias,
            known_hosts=tmp_path / "sleuth_known_hosts",
            ssh_config_path=sshd.ssh_config_path,
            user_known_hosts=sshd.known_hosts_path,
            calls=ssh_calls,
        )
        made.append(host)
        host.stat("/")  # connect now, so a broken fixture fails here and not inside a tool
        config = HostConfig(ssh=sshd.alias, roots=list(roots), allow=list(allow))
        return SandboxedHost(name, host, config, Limits())

    yield make
    for host in made:
        host.close()


@pytest.fixture
def make_context(ssh_host_factory: SandboxFactory) -> Callable[..., ToolContext]:
    def make(
        roots: Sequence[str], allow: Sequence[str] = (), approver: Approver = deny_all
    ) -> ToolContext:
        config = HostConfig(roots=list(roots), allow=list(allow))
        local = SandboxedHost("local", LocalHost("local"), config, Limits())
        remote = ssh_host_factory("remote", roots, allow)
        return ToolContext(hosts={"local": local, "remote": remote}, approver=approver)

    return make
