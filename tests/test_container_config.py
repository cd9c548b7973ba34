"""Container and pod hosts in sleuth.toml (issue 40): names checked against each runtime's
own grammar before any reaches a command line, and the argv each runtime gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.config import ConfigError, HostConfig, load_settings
from sleuth.hosts.container.records import image_facts
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
    assert podman.logs_argv(50)[-3:] == ["--timestamps", "--", "sglang-0"]
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


def test_kubectl_pods_are_read_into_one_record_per_container() -> None:
    """The reader of `kubectl get pods -o json` (no cluster here: a document in the shape the
    Kubernetes API documents for a Pod list, written for this test)."""
    from sleuth.hosts.container.discover import pod_records, toml_lines

    digest = "sha256:" + "ab" * 32
    pods = {
        "items": [
            {
                "metadata": {"namespace": "serving", "name": "decode-0"},
                "spec": {
                    "nodeName": "gpu-07",
                    "containers": [
                        {
                            "name": "engine",
                            "image": "vllm/vllm-openai:v0.11.0",
                            "args": ["--model", "/models/llama", "--tensor-parallel-size", "8"],
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        },
                        {"name": "proxy", "image": "envoyproxy/envoy:v1.31"},
                    ],
                },
                "status": {
                    "containerStatuses": [
                        {
                            "name": "engine",
                            "imageID": f"docker.io/vllm/vllm-openai@{digest}",
                            "restartCount": 4,
                            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                            "lastState": {"terminated": {"reason": "OOMKilled"}},
                        },
                        {"name": "proxy", "restartCount": 0, "state": {"running": {}}},
                    ]
                },
            }
        ]
    }
    engine, proxy = pod_records(pods)
    assert (engine.pod, engine.name, engine.node) == ("serving/decode-0", "engine", "gpu-07")
    assert (engine.engine, engine.image_digest, engine.gpus) == ("vllm", digest, "8")
    assert (engine.restarts, engine.state, engine.last_termination) == (
        4, "waiting", "OOMKilled"
    )  # fmt: skip
    assert proxy.engine is None and proxy.state == "running"
    # Which run of the pod's container a session read: a restart changes it.
    pod = pods["items"][0]
    target = Target(runtime="kubectl", namespace="serving", pod="decode-0", container="engine")
    run = image_facts(target, pod)["started"]
    pod["status"]["containerStatuses"][0]["restartCount"] = 5
    assert image_facts(target, pod)["started"] not in ("", run)
    assert toml_lines(engine, "gpu1")[:5] == [
        "[hosts.serving-decode-0]", 'via = "gpu1"', 'runtime = "kubectl"',
        'pod = "serving/decode-0"', 'container = "engine"',
    ]  # fmt: skip


def test_the_real_kubectl_accepts_every_command_line_sleuth_builds(tmp_path: Path) -> None:
    """No cluster here: the kubeconfig points at a closed port on 127.0.0.1, so kubectl parses
    each command line and then fails to connect. A flag it did not know would fail first
    ("unknown flag"), before any connection."""
    import shutil
    import socket
    import subprocess

    from sleuth.hosts.container.discover import LIST_TIMEOUT_S

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (not part of the Test command's packages)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        f"clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "contexts:\n- name: prod\n  context:\n    cluster: c\n    user: u\n"
        "users:\n- name: u\n  user: {}\n"
    )
    pod = Target.of(
        HostConfig(
            via="local", runtime="kubectl", pod="serving/decode-0", container="engine",
            context="prod",
        ),
        "kubectl",
    )  # fmt: skip
    lines = [
        pod.exec_argv(["python3", "-I", "-S", "-c", "pass", "serve"], stdin=True),
        pod.exec_argv(["cat", "/etc/hostname"], stdin=False),
        pod.logs_argv(200, previous=True),
        pod.inspect_argv(),
        ["kubectl", "get", "pods", "--namespace=serving", "--output=json", "--selector=app=x"],
    ]
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "kubeconfig"),
           "HOME": str(tmp_path)}  # fmt: skip
    for argv in lines:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=LIST_TIMEOUT_S, check=False
        )
        assert done.returncode != 0
        assert "unknown flag" not in done.stderr and "Usage" not in done.stderr, argv
        assert f"127.0.0.1:{port}" in done.stderr, (argv, done.stderr[-500:])


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ('pods = "serving/app=sglang"', r"needs `via`"),
        ('pods = "serving/app=sglang"\nvia = "gpu1"\nhosts = ["gpu1"]', r"not both"),
        ('pods = "serving/app sglang"\nvia = "gpu1"', r"not NAMESPACE/SELECTOR"),
        ('pods = "Serving/app=sglang"\nvia = "gpu1"', r"not NAMESPACE/SELECTOR"),
        ('pods = "s/app=x"\nvia = "gpu1"\ncontainer = "Engine"', r"not a Kubernetes container"),
        ('pods = "s/app=x"\nvia = "elsewhere"', r"via 'elsewhere' is not a host"),
        ('hosts = ["gpu1"]\ncontainer = "engine"', r"is for a group of pods"),
    ],
)
def test_a_group_of_pods_that_cannot_mean_what_it_says_is_refused(
    tmp_path: Path, group: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, "[groups.decode]\n" + group + "\n")


def test_a_group_of_pods_makes_one_kubectl_host_per_pod() -> None:
    from sleuth.config import GroupConfig
    from sleuth.hosts.container.discover import ContainerRecord
    from sleuth.hosts.container.pods import hosts_of

    group = GroupConfig(pods="serving/app=sglang", via="gpu1", container="engine", roots=["/m"])
    records = [
        ContainerRecord(name=c, runtime="kubectl", pod=f"serving/{pod}")
        for pod, c in [("decode-0", "engine"), ("decode-0", "proxy"), ("decode-1", "engine")]
    ]
    made = hosts_of(records, group)
    assert list(made) == ["decode-0", "decode-1"]
    assert made["decode-1"].model_dump(include={"via", "runtime", "pod", "container", "roots"}) == {
        "via": "gpu1", "runtime": "kubectl", "pod": "serving/decode-1", "container": "engine",
        "roots": ["/m"],
    }  # fmt: skip


def test_a_group_of_pods_is_listed_by_the_real_kubectl_when_a_run_starts(tmp_path: Path) -> None:
    """No cluster: kubectl on the via host (this machine) is asked for the pods when the run
    chooses its hosts, and its failure stops the run with the group and kubectl's reason."""
    import os
    import shutil
    import socket
    import subprocess
    import sys

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (not part of the Test command's packages)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "users:\n- name: u\n  user: {}\n"
    )
    (tmp_path / "sleuth.toml").write_text(
        '[groups.decode]\npods = "serving/app=sglang"\nvia = "local"\nroots = ["/m"]\n'
    )
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig"), "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-m", "sleuth.cli", "tool", "python_env", "--hosts", "decode"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "group 'decode': kubectl on 'local' could not list pods 'serving/app=sglang'" in said
    assert f"127.0.0.1:{port}" in said
