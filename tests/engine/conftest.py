"""The engine tier: Sleuth against a real vLLM (CPU build) and real installed engine sources.

Every test here carries the `engine` marker (`pytest -m "not engine"` skips the tier). The
engine environment is built on first use and cached (tests/engine/engine_env.py); the hosts
are reached over the suite's real sshd, as an operator's GPU host would be.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from sleuth.config import ApprovalRules, HostConfig, Limits
from sleuth.hosts.policy import SandboxedHost
from sleuth.tools.approval import ApprovalDecision, ApprovalRequest
from sleuth.tools.context import ToolContext
from tests.engine.engine_env import EngineEnv, SourceEnv
from tests.sshd import SSHServer

HERE = Path(__file__).resolve().parent
MUTATING = ["launch_server", "stop_server", "run_benchmark"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.engine)


def approve(request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(approved=True, by="engine tier")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def engine_env() -> EngineEnv:
    return EngineEnv.ensure()


@pytest.fixture(scope="session")
def sglang_src() -> SourceEnv:
    return SourceEnv.ensure()


RemoteFactory = Callable[..., ToolContext]


@pytest.fixture(scope="module")
def remote_context(
    sshd: SSHServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteFactory]:
    """`remote_context(roots)`: a ToolContext whose host "gpu" is this machine over sshd,
    allowed to launch, stop and benchmark, with every call approved."""
    from sleuth.hosts.ssh import SSHHost

    made: list[ToolContext] = []
    tmp = tmp_path_factory.mktemp("engine-ctx")

    def make(roots: Sequence[str]) -> ToolContext:
        host = SSHHost(
            "gpu",
            sshd.alias,
            known_hosts=tmp / "known_hosts",
            ssh_config_path=sshd.ssh_config_path,
            user_known_hosts=sshd.known_hosts_path,
        )
        host.stat("/")
        # VLLM_CACHE_ROOT (the compile cache the tests keep) names code the engine loads: only
        # a rule that names it exactly approves it, whatever the approver says.
        code = ApprovalRules(env=["VLLM_CACHE_ROOT"])
        config = HostConfig(ssh=sshd.alias, roots=list(roots), allow=MUTATING, approve=code)
        ctx = ToolContext(
            hosts={"gpu": SandboxedHost("gpu", host, config, Limits())},
            approver=approve,
            results_dir=tmp / "bench-results",
        )
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()
