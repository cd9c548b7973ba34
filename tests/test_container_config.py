"""Container and pod hosts in sleuth.toml (issue 40): names checked against each runtime's
own grammar before any reaches a command line, and the argv each runtime gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.config import ConfigError, HostConfig, load_settings
from sleuth.hosts.container.target import Target


def load(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sleuth.toml"
    path.write_text('[hosts.gpu1]\nssh = "gpu1"\n\n' + text)
    load_settings(path, cwd=tmp_path)


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ('via = "gpu1"\ncontainer = "-it"\nruntime = "podman"', r":6: .*not a container name"),
        ('via = "gpu1"\ncontainer = "a b"', r"not a container name"),
        ('via = "gpu1"\ncontainer = "x;rm -rf /"', r"not a container name"),
        ('via = "gpu1"\nruntime = "kubectl"', r"needs `pod"),
        ('via = "gpu1"\nruntime = "kubectl"\npod = "serving/--all"', r"not NAMESPACE/NAME"),
        ('via = "gpu1"\nruntime = "kubectl"\npod = "Serving/x"', r"not NAMESPACE/NAME"),
        ('via = "gpu1"\nruntime = "kubectl"\npod = "s/x"\ncontext = "-x"', r"not a kubeconfig"),
        ('via = "gpu1"\nruntime = "kubectl"\npod = "s/x"\ncontainer = "E"', r"not a Kubernetes"),
        ('via = "gpu1"\ncontainer = "c"\npod = "s/x"', r'set `runtime = "kubectl"`'),
        ('via = "nowhere"\ncontainer = "c"', r"via 'nowhere' is not a host"),
        ('via = "gpu1"\ncontainer = "c"\nssh = "gpu1"', r"drop `ssh`"),
        ('ssh = "gpu1"\ncontainer = "c"', r"needs `via`"),
        ('via = "gpu1"\ncontainer = "c"\nallow = ["stop_server"]', r"never allowed on a container"),
        ('via = "gpu1"\ncontainer = "c"\nruntime = "lxc"', r"runtime"),
    ],
)
def test_a_container_host_that_cannot_mean_what_it_says_is_refused(
    tmp_path: Path, host: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, "[hosts.box]\n" + host + "\n")


def test_container_and_pod_hosts_load(tmp_path: Path) -> None:
    load(
        tmp_path,
        '[hosts.box]\nvia = "gpu1"\ncontainer = "sglang-0"\nroots = ["/sgl-workspace"]\n'
        '[hosts.pod]\nvia = "local"\nruntime = "kubectl"\npod = "serving/decode-0.a"\n'
        'context = "arn:aws:eks:us-east-1:1:cluster/prod"\ncontainer = "engine"\n',
    )


def test_each_runtime_gets_double_dash_before_its_operands_and_no_environment() -> None:
    podman = Target.of(HostConfig(via="local", container="sglang-0"), "podman")
    assert podman.exec_argv(["cat", "/x"], stdin=False) == [
        "podman", "exec", "--", "sglang-0", "cat", "/x"
    ]  # fmt: skip
    assert podman.logs_argv(50) == ["podman", "logs", "--tail", "50", "--", "sglang-0"]
    pod = Target.of(
        HostConfig(via="local", runtime="kubectl", pod="serving/decode-0", context="prod"),
        "kubectl",
    )
    assert pod.exec_argv(["python3", "-"], stdin=True) == [
        "kubectl", "--context=prod", "exec", "--namespace=serving", "-i", "decode-0", "--",
        "python3", "-",
    ]  # fmt: skip
    assert pod.logs_argv(10, previous=True)[-3:] == ["--previous", "--", "decode-0"]
    for argv in (podman.exec_argv(["x"], stdin=True), pod.exec_argv(["x"], stdin=True)):
        assert not any(a in ("-e", "--env", "--env-file") or a.startswith("--env") for a in argv)
