"""What containers a host runs: the runtime's own records, read once, as data.

```python
found = discover(host, "podman")          # `podman ps -a -q --no-trunc`, then one `inspect`
found[0].engine, found[0].image, found[0].mounts
toml_lines(found[0], via="gpu1")          # the [hosts.NAME] table that makes it a host
```

Pods: `kubectl get pods --namespace NS [--selector S] -o json`, each pod's containers with
their images, node, restarts and last termination reason (`pod_records`). Environment
variables are never returned (they hold tokens): only NVIDIA_VISIBLE_DEVICES is read, to
say which GPUs a container asked for.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from sleuth.config.containers import RUNTIMES, Runtime
from sleuth.errors import ErrorKind, HostError
from sleuth.hosts.host import RunResult
from sleuth.hosts.program.server_procs import engine_of

ENGINE_IMAGES = {"sglang": re.compile(r"sglang"), "vllm": re.compile(r"vllm")}
"""An image named for an engine (lmsysorg/sglang, vllm/vllm-openai) runs it, whatever its
command line says (an entrypoint script)."""
CHECKPOINT_WORDS = re.compile(r"model|checkpoint|huggingface|/hf|weights", re.IGNORECASE)
LIST_TIMEOUT_S = 30.0


class Mount(BaseModel):
    source: str
    destination: str
    writable: bool = False
    checkpoint: bool = False
    """Named like a model store, or a path the command line names lies beneath it."""


class ContainerRecord(BaseModel):
    """One container as its runtime reports it (or one container of a pod)."""

    name: str
    runtime: Runtime
    image: str = ""
    image_digest: str = ""
    state: str = ""
    command: list[str] = Field(default_factory=list)
    ports: list[str] = Field(default_factory=list)
    """`HOST_IP:HOST_PORT->PORT/PROTO`, or `host network`."""
    gpus: str = ""
    """What it asked for: `all`, a count, device ids, or "" for none."""
    mounts: list[Mount] = Field(default_factory=list)
    engine: str | None = None
    """sglang, vllm, trtllm or tgi when it runs an inference engine."""
    pod: str = ""
    """`NAMESPACE/NAME` for a pod's container."""
    node: str = ""
    restarts: int = 0
    last_termination: str = ""


class Runner(Protocol):
    """A host, or a sandboxed one: what runs the runtime's commands."""

    name: str

    def run(self, argv: Sequence[str], *, timeout: float, max_bytes: int) -> RunResult: ...


def find_runtime(host: Runner, wanted: str) -> Runtime:
    """The first of docker, podman and nerdctl that answers on `host`: `version` asks the
    daemon too, so a docker client without a running daemon is passed over. `wanted` names
    what asked, for the message when none answers."""
    for runtime in RUNTIMES[:3]:
        try:
            done = host.run([runtime, "version"], timeout=LIST_TIMEOUT_S, max_bytes=64 * 1024)
        except HostError as exc:
            if exc.kind is ErrorKind.COMMAND_NOT_FOUND:
                continue
            raise
        if done.exit_code == 0:
            return runtime
    raise HostError(
        f"none of docker, podman or nerdctl answers on host {host.name!r} (a client whose "
        f"daemon is down does not count); start or install one there, or set `runtime` for "
        f"{wanted}",
        ErrorKind.COMMAND_NOT_FOUND,
    )


def _run(host: Runner, argv: list[str]) -> RunResult:
    done = host.run(argv, timeout=LIST_TIMEOUT_S, max_bytes=32 << 20)
    if done.timed_out or done.exit_code != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise HostError(
            f"`{' '.join(argv[:3])}` failed on host {host.name!r} (exit {done.exit_code}): "
            f"{said[-1] if said else 'no message'}",
            ErrorKind.FAILED,
        )
    return done


def discover(host: Runner, runtime: Runtime) -> list[ContainerRecord]:
    """Every container (running or not) the runtime on `host` knows."""
    ids = _run(host, [runtime, "ps", "--all", "--quiet", "--no-trunc"]).stdout.decode().split()
    if not ids:
        return []
    done = _run(host, [runtime, "inspect", "--type", "container", "--", *ids])
    records = json.loads(done.stdout)
    found = [container_record(runtime, raw) for raw in records if isinstance(raw, dict)]
    return sorted(found, key=lambda r: r.name)


def discover_pods(
    host: Runner, namespace: str, selector: str | None, context: str | None = None
) -> list[ContainerRecord]:
    """The containers of a namespace's pods (those `selector` picks), as kubectl reports."""
    head = ["kubectl", *([f"--context={context}"] if context else [])]
    argv = [*head, "get", "pods", f"--namespace={namespace}", "--output=json"]
    argv += [f"--selector={selector}"] if selector else []
    return pod_records(json.loads(_run(host, argv).stdout))


def container_record(runtime: Runtime, raw: dict[str, Any]) -> ContainerRecord:
    """One `inspect` record (docker, podman or nerdctl) as a ContainerRecord."""
    config = raw.get("Config") or {}
    host_config = raw.get("HostConfig") or {}
    state = raw.get("State") or {}
    command = [str(raw.get("Path") or ""), *map(str, raw.get("Args") or [])]
    command = [a for a in command if a] or [str(a) for a in config.get("Cmd") or []]
    image = str(raw.get("ImageName") or config.get("Image") or "")
    mounts = [
        Mount(
            source=str(m.get("Source") or ""),
            destination=str(m.get("Destination") or ""),
            writable=bool(m.get("RW")),
        )
        for m in raw.get("Mounts") or []
        if isinstance(m, dict)
    ]
    for mount in mounts:
        mount.checkpoint = _holds_checkpoint(mount.destination, command)
    return ContainerRecord(
        name=str(raw.get("Name") or raw.get("Id", "")[:12]).lstrip("/"),
        runtime=runtime,
        image=image,
        image_digest=str(raw.get("ImageDigest") or raw.get("Image") or ""),
        state=str(state.get("Status") or "") if isinstance(state, dict) else str(state),
        command=command,
        ports=_ports(raw, host_config),
        gpus=_gpus(host_config, config),
        mounts=mounts,
        engine=_engine(command, image),
    )


def _engine(command: list[str], image: str) -> str | None:
    by_command = engine_of(command)
    if by_command is not None:
        return by_command
    name = image.rsplit("/", 1)[-1].split(":", 1)[0]
    return next((engine for engine, word in ENGINE_IMAGES.items() if word.search(name)), None)


def _holds_checkpoint(destination: str, command: list[str]) -> bool:
    if CHECKPOINT_WORDS.search(destination):
        return True
    inside = destination.rstrip("/") + "/"
    values = [a.split("=", 1)[-1] for a in command]
    return any(posixpath.normpath(v).startswith(inside) for v in values if v.startswith("/"))


def _ports(raw: dict[str, Any], host_config: dict[str, Any]) -> list[str]:
    if host_config.get("NetworkMode") == "host":
        return ["host network"]
    bound = (raw.get("NetworkSettings") or {}).get("Ports") or {}
    found = []
    for inner, outers in sorted(bound.items()):
        for outer in outers or []:
            found.append(f"{outer.get('HostIp') or '0.0.0.0'}:{outer.get('HostPort')}->{inner}")
    return found


def _gpus(host_config: dict[str, Any], config: dict[str, Any]) -> str:
    for request in host_config.get("DeviceRequests") or []:
        capabilities = str(request.get("Capabilities") or "")
        if "gpu" in capabilities or request.get("Driver") == "nvidia":
            ids = request.get("DeviceIDs") or []
            count = request.get("Count")
            return ",".join(ids) if ids else ("all" if count in (-1, None) else str(count))
    devices = [
        str(d.get("PathOnHost") or "")
        for d in host_config.get("Devices") or []
        if re.fullmatch(r"/dev/nvidia\d+", str(d.get("PathOnHost") or ""))
    ]
    if devices:
        return ",".join(devices)
    for entry in config.get("Env") or []:
        name, _, value = str(entry).partition("=")
        if name == "NVIDIA_VISIBLE_DEVICES" and value not in ("", "void", "none"):
            return value
    return ""


def pod_records(raw: Any) -> list[ContainerRecord]:
    """`kubectl get pods -o json` as one record per container of each pod."""
    found = []
    for pod in (raw or {}).get("items") or []:
        meta, spec, status = (
            pod.get("metadata") or {},
            pod.get("spec") or {},
            pod.get("status") or {},
        )
        statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
        for container in spec.get("containers") or []:
            st = statuses.get(container.get("name")) or {}
            terminated = (st.get("lastState") or {}).get("terminated") or {}
            command = [*(container.get("command") or []), *(container.get("args") or [])]
            image = str(container.get("image") or "")
            limits = (container.get("resources") or {}).get("limits") or {}
            found.append(
                ContainerRecord(
                    name=str(container.get("name") or ""),
                    runtime="kubectl",
                    image=image,
                    image_digest=str(st.get("imageID") or "").rpartition("@")[2],
                    state=next(iter(st.get("state") or {}), ""),
                    command=[str(a) for a in command],
                    gpus=str(limits.get("nvidia.com/gpu") or ""),
                    engine=_engine([str(a) for a in command], image),
                    pod=f"{meta.get('namespace')}/{meta.get('name')}",
                    node=str(spec.get("nodeName") or ""),
                    restarts=int(st.get("restartCount") or 0),
                    last_termination=str(terminated.get("reason") or ""),
                )
            )
    return found


def toml_lines(record: ContainerRecord, via: str) -> list[str]:
    """The sleuth.toml table that makes this container a host, its roots the mounts that
    hold checkpoints."""
    name = re.sub(
        r"[^A-Za-z0-9_-]", "-", record.pod.replace("/", "-") if record.pod else record.name
    )
    lines = [f"[hosts.{name}]", f'via = "{via}"', f'runtime = "{record.runtime}"']
    if record.pod:
        lines += [f'pod = "{record.pod}"', f'container = "{record.name}"']
    else:
        lines.append(f'container = "{record.name}"')
    roots = [m.destination for m in record.mounts if m.checkpoint]
    lines.append("roots = [" + ", ".join(json.dumps(r) for r in roots) + "]")
    return lines
