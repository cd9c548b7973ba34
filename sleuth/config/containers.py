"""Container and pod hosts in `sleuth.toml`: the names each runtime accepts, checked before
any of them reaches a command line.

```toml
[hosts.sglang0]
via = "gpu1"                  # the host that runs the runtime: an SSH host, or "local"
container = "sglang-0"
runtime = "podman"            # docker | podman | nerdctl | kubectl
roots = ["/sgl-workspace", "/models"]

[hosts.decode0]
via = "gpu1"
runtime = "kubectl"
pod = "serving/decode-0"      # NAMESPACE/NAME
container = "engine"          # optional with kubectl
context = "prod"              # optional
```
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from sleuth.config import HostConfig

Runtime = Literal["docker", "podman", "nerdctl", "kubectl"]
RUNTIMES: tuple[Runtime, ...] = ("docker", "podman", "nerdctl", "kubectl")
MUTATING_REFUSED = ("launch_server", "stop_server")
"""Refused on every container and pod host: Sleuth does not restart someone else's pod."""

CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,253}")
"""Docker's (and podman's and nerdctl's) container names and ids: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`."""
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""Kubernetes namespaces and container names (RFC 1123 label, at most 63)."""
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*")
"""Kubernetes pod names (RFC 1123 subdomain, at most 253)."""
CONTEXT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@/+-]{0,252}")
"""kubeconfig context names as clusters write them (`gke_p_z_c`, `arn:aws:eks:...:cluster/c`)."""
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_REQUIREMENT = rf"!?({_LABEL}(\.{_LABEL})*/)?{_NAME}((==?|!=)({_NAME})?)?"
LABEL_SELECTOR = re.compile(rf"{_REQUIREMENT}(,{_REQUIREMENT})*")
"""Equality-based label selectors: `app=sglang,role!=prefill`, `app`, `!canary`."""


def split_pod(value: str) -> tuple[str, str] | None:
    """`NAMESPACE/NAME` as its two parts, or None when it is not one."""
    namespace, _, name = value.partition("/")
    if DNS_LABEL.fullmatch(namespace) and DNS_SUBDOMAIN.fullmatch(name):
        return namespace, name
    return None


def split_selector(value: str) -> tuple[str, str] | None:
    """`NAMESPACE/SELECTOR` (`serving/app=sglang`) as its two parts, or None."""
    namespace, _, selector = value.partition("/")
    if DNS_LABEL.fullmatch(namespace) and LABEL_SELECTOR.fullmatch(selector):
        return namespace, selector
    return None


def container_problem(
    runtime: str | None, container: str | None, pod: str | None, context: str | None
) -> tuple[str, str] | None:
    """The key of a container or pod host that cannot mean what it says, and why; or None."""
    if runtime == "kubectl":
        if pod is None:
            return "pod", 'a kubectl host needs `pod = "NAMESPACE/NAME"`'
        if split_pod(pod) is None:
            return "pod", (
                f"pod {pod!r} is not NAMESPACE/NAME as Kubernetes names them (lower-case "
                'letters, digits, `-` and `.`), e.g. "serving/sglang-decode-0"'
            )
        if container is not None and not DNS_LABEL.fullmatch(container):
            return "container", f"container {container!r} is not a Kubernetes container name"
        if context is not None and not CONTEXT_NAME.fullmatch(context):
            return "context", f"context {context!r} is not a kubeconfig context name"
        return None
    if pod is not None or context is not None:
        key = "pod" if pod is not None else "context"
        return key, f'`{key}` is for pods: set `runtime = "kubectl"`, or drop it'
    if container is None:
        return "container", "a container host needs `container = NAME` (or `pod` for kubectl)"
    if not CONTAINER_NAME.fullmatch(container):
        return "container", (
            f"container {container!r} is not a container name or id (letters, digits, `_`, "
            "`.` and `-`, starting with a letter or digit)"
        )
    return None


def pods_problem(
    hosts: list[str], pods: str | None, via: str | None, container: str | None, context: str | None
) -> tuple[str, str] | None:
    """The key of a group that cannot mean what it says about its members, and why; or None.
    A group lists `hosts`, or selects `pods` through kubectl on `via`."""
    if pods is None:
        if via or container or context:
            key = "via" if via else "container" if container else "context"
            return key, f'`{key}` is for a group of pods: set `pods = "NAMESPACE/SELECTOR"`'
        return None
    if hosts:
        return "pods", "a group lists `hosts` or selects `pods`, not both"
    if split_selector(pods) is None:
        return "pods", (
            f'pods {pods!r} is not NAMESPACE/SELECTOR, e.g. "serving/app=sglang,role=decode"'
        )
    if via is None:
        return "via", "a group of pods needs `via`: the host whose kubectl lists them"
    return container_problem("kubectl", container, f"{pods.partition('/')[0]}/x", context)


def reach_problem(
    name: str, host: HostConfig, hosts: dict[str, HostConfig]
) -> tuple[list[str], str] | None:
    """How a host is reached, when that cannot work: the key and why; or None."""
    from sleuth.config import LOCAL

    if name == LOCAL:
        return None
    if host.via is None:
        if host.container or host.runtime or host.pod or host.context:
            return ["via"], "a container or pod host needs `via`: the host that runs its runtime"
        return None
    if host.ssh:
        return ["ssh"], "a container host is reached through `via`; drop `ssh`"
    via = hosts.get(host.via)
    if via is None and host.via != LOCAL:
        return ["via"], f"via {host.via!r} is not a host in [hosts] (nor `local`)"
    if via is not None and via.via is not None:
        return ["via"], f"via {host.via!r} is itself a container; name the host that runs it"
    if refused := [tool for tool in host.allow if tool in MUTATING_REFUSED]:
        return ["allow"], (
            f"{refused[0]} is never allowed on a container or pod host: Sleuth does not "
            "restart someone else's container or pod"
        )
    if found := container_problem(host.runtime, host.container, host.pod, host.context):
        return [found[0]], found[1]
    return None
