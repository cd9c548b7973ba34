"""A group of pods (`[groups.decode] pods = "serving/app=sglang,role=decode"`, `via = "gpu1"`):
kubectl on the via host lists the pods when a run chooses its hosts, and each becomes a host
of its own (`runtime = "kubectl"`, `pod = "NAMESPACE/NAME"`), so "do all decode pods run the
same image and flags" is one fleet question. A pod that vanishes or is replaced after that
is a failed member of the fleet call, with kubectl's reason.
"""

from __future__ import annotations

from sleuth.config import ConfigError, GroupConfig, HostConfig, Settings
from sleuth.config.containers import split_selector
from sleuth.errors import HostError
from sleuth.hosts.container.discover import ContainerRecord, discover_pods


def pod_hosts(settings: Settings, group: str, config: GroupConfig) -> dict[str, HostConfig]:
    """The group's pods as hosts, named for their pods, in kubectl's order."""
    from sleuth.hosts.connect import open_host

    assert config.pods is not None and config.via is not None, "checked with sleuth.toml"
    parts = split_selector(config.pods)
    assert parts is not None, "checked with sleuth.toml"
    namespace, selector = parts
    via = open_host(settings, config.via)
    try:
        records = discover_pods(via, namespace, selector, config.context)
    except HostError as exc:
        raise ConfigError(
            f"group {group!r}: kubectl on {config.via!r} could not list pods {config.pods!r}: {exc}"
        ) from exc
    finally:
        via.close()
    made = hosts_of(records, config)
    if not made:
        raise ConfigError(
            f"group {group!r}: no pod in namespace {namespace!r} matches {selector!r} "
            f"(kubectl on {config.via!r}); check the selector with `sleuth hosts --discover "
            f"{config.via} --runtime kubectl --namespace {namespace}`"
        )
    return made


def hosts_of(records: list[ContainerRecord], config: GroupConfig) -> dict[str, HostConfig]:
    """One host per pod (not per container): the pod's name, its `NAMESPACE/NAME`."""
    made: dict[str, HostConfig] = {}
    for record in records:
        name = record.pod.partition("/")[2]
        if name and name not in made:
            made[name] = HostConfig(
                via=config.via,
                runtime="kubectl",
                pod=record.pod,
                container=config.container,
                context=config.context,
                roots=list(config.roots),
                python=config.python,
            )
    return made
