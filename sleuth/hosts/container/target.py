"""A container or pod as its runtime's command lines: exec, logs and inspect, as argv.

```python
target = Target(runtime="podman", container="sglang-0")
target.exec_argv(["python3", "-V"], stdin=False)
# ['podman', 'exec', '--', 'sglang-0', 'python3', '-V']
target = Target(runtime="kubectl", namespace="serving", pod="decode-0", container="engine")
target.logs_argv(200, previous=True)
# ['kubectl', 'logs', '--namespace=serving', '--container=engine', '--tail=200',
#  '--timestamps', '--previous', '--', 'decode-0']
```

Names were checked against each runtime's grammar when sleuth.toml was read
(`config/containers.py`): none can begin with `-`. `--` comes before the container (docker,
podman, nerdctl) and before the command (kubectl, whose pod must come first to be the pod).
Nothing passes environment into the exec (no `-e`, no `--env-file`): the command sees the
container's own environment, never this machine's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from sleuth.config import HostConfig
from sleuth.config.containers import Runtime, split_pod


class Target(BaseModel):
    runtime: Runtime
    container: str | None = None
    """The container (docker, podman, nerdctl), or the pod's container (kubectl)."""
    namespace: str | None = None
    pod: str | None = None
    context: str | None = None
    pinned: str | None = None
    """The container's id once Sleuth has seen it (docker, podman, nerdctl): every command
    names the id, so a container replaced under the same name mid-session is an error, never
    a different container read under the record of the first."""

    @staticmethod
    def of(config: HostConfig, runtime: Runtime) -> Target:
        namespace = pod = None
        if config.pod is not None:
            parts = split_pod(config.pod)
            assert parts is not None, "checked when sleuth.toml was read"
            namespace, pod = parts
        return Target(
            runtime=runtime,
            container=config.container,
            namespace=namespace,
            pod=pod,
            context=config.context,
        )

    @property
    def label(self) -> str:
        """`podman:sglang-0`, `kubectl:serving/decode-0/engine`: what a person reads."""
        if self.runtime == "kubectl":
            inner = f"/{self.container}" if self.container else ""
            return f"kubectl:{self.namespace}/{self.pod}{inner}"
        return f"{self.runtime}:{self.container}"

    def _kubectl(self, verb: str) -> list[str]:
        head = ["kubectl"]
        if self.context:
            head.append(f"--context={self.context}")
        head += [verb, f"--namespace={self.namespace}"]
        if self.container:
            head.append(f"--container={self.container}")
        return head

    def exec_argv(self, argv: Sequence[str], *, stdin: bool) -> list[str]:
        """`argv` run in the container; `stdin` attaches this side's input (`-i`)."""
        interactive = ["-i"] if stdin else []
        if self.runtime == "kubectl":
            assert self.pod is not None
            return [*self._kubectl("exec"), *interactive, self.pod, "--", *argv]
        return [self.runtime, "exec", *interactive, "--", self._name, *argv]

    def logs_argv(self, tail: int, *, previous: bool = False) -> list[str]:
        """The container's log, its last `tail` lines, each after its timestamp (so what the
        runtime splits into stdout and stderr goes back in order); `previous`: a pod's
        container before its last restart (kubectl only)."""
        if self.runtime == "kubectl":
            assert self.pod is not None
            before = ["--previous"] if previous else []
            head = [*self._kubectl("logs"), f"--tail={tail}", "--timestamps", *before]
            return [*head, "--", self.pod]
        head = [self.runtime, "logs", "--tail", str(tail), "--timestamps"]
        return [*head, "--", self._name]

    def inspect_argv(self) -> list[str]:
        """The container's (or pod's) record as JSON."""
        if self.runtime == "kubectl":
            assert self.pod is not None
            head = ["kubectl"] + ([f"--context={self.context}"] if self.context else [])
            return [
                *head,
                "get",
                "pod",
                f"--namespace={self.namespace}",
                "-o",
                "json",
                "--",
                self.pod,
            ]
        return [self.runtime, "inspect", "--type", "container", "--", self._name]

    @property
    def _name(self) -> str:
        name = self.pinned or self.container
        assert name is not None, "checked when sleuth.toml was read"
        return name
