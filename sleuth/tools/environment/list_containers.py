"""list_containers: the containers (or a namespace's pods) a host runs, which of them serve an
inference engine, and the sleuth.toml lines that make each a host.

The reading is `hosts/container/discover.py`; this module checks the input, runs it on the
host and renders it. Read-only: `ps`, `inspect` and `kubectl get pods`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from sleuth.config.containers import DNS_LABEL, LABEL_SELECTOR
from sleuth.hosts.container.discover import (
    ContainerRecord,
    discover,
    discover_pods,
    find_runtime,
    toml_lines,
)
from sleuth.hosts.host import HostError
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ToolInput, tool
from sleuth.tools.results import ToolError, cap_output
from sleuth.transcripts.results import ToolResult


class ListContainersInput(ToolInput):
    runtime: Literal["docker", "podman", "nerdctl", "kubectl"] | None = Field(
        None,
        description="The runtime to ask; default: whichever of docker, podman, nerdctl the "
        "host has. kubectl lists pods (give namespace)",
    )
    namespace: str | None = Field(None, description="kubectl: the namespace, e.g. serving")
    selector: str | None = Field(
        None, description="kubectl: a label selector, e.g. app=sglang,role=decode"
    )

    @model_validator(mode="after")
    def _pods(self) -> ListContainersInput:
        if self.runtime == "kubectl":
            if self.namespace is None or not DNS_LABEL.fullmatch(self.namespace):
                raise ValueError("kubectl needs namespace, a Kubernetes namespace name")
            if self.selector is not None and not LABEL_SELECTOR.fullmatch(self.selector):
                raise ValueError(f"selector {self.selector!r} is not a label selector (k=v,...)")
        elif self.namespace is not None or self.selector is not None:
            raise ValueError('namespace and selector are for pods: set runtime="kubectl"')
        return self


class ContainerListing(BaseModel):
    runtime: str
    containers: list[ContainerRecord]
    toml: list[str] = Field(description="sleuth.toml lines making each container a host.")


@tool()
def list_containers(ctx: ToolContext, args: ListContainersInput) -> ToolResult:
    """List the containers on a host (docker, podman or nerdctl), or with runtime="kubectl"
    the pods of a namespace (optionally a label selector): name, image and digest, state,
    command, ports, GPUs asked for, mounts that hold checkpoints; for pods also node,
    restarts and last termination reason. Marks which run an inference engine (SGLang, vLLM,
    TensorRT-LLM, TGI) and prints the sleuth.toml lines that would make each a host, so the
    engine's own files, Python and logs can be read. Read-only; never shows environments.
    """
    sandbox = ctx.host(args.host)
    try:
        if args.runtime == "kubectl":
            assert args.namespace is not None
            runtime = "kubectl"
            found = discover_pods(sandbox, args.namespace, args.selector)
        else:
            runtime = args.runtime or find_runtime(sandbox, "list_containers")
            found = discover(sandbox, runtime)
    except HostError as exc:
        raise ToolError(str(exc), exc.kind) from exc
    lines = [line for record in found for line in [*toml_lines(record, args.host), ""]]
    listing = ContainerListing(runtime=runtime, containers=found, toml=lines)
    text, cut = cap_output(
        "\n".join(render(args.host, listing)),
        ctx.limits.max_output_bytes,
        ctx.limits.max_output_lines,
    )
    return ToolResult(ok=True, output=text, data=listing.model_dump(mode="json"), bytes_cut=cut)


def render(host: str, listing: ContainerListing) -> list[str]:
    engines = sum(r.engine is not None for r in listing.containers)
    out = [
        f"{len(listing.containers)} containers on {host} ({listing.runtime}), "
        f"{engines} running an inference engine"
    ]
    for r in listing.containers:
        mark = f"  [engine: {r.engine}]" if r.engine else ""
        where = f"pod {r.pod} container " if r.pod else ""
        out.append(f"- {where}{r.name}: {r.state}{mark}")
        image = f"{r.image}@{r.image_digest}" if r.image_digest else r.image
        out.append(f"    image: {image or '(none: started from a root filesystem)'}")
        out.append(f"    command: {' '.join(r.command)}")
        if r.ports:
            out.append(f"    ports: {', '.join(r.ports)}")
        if r.gpus:
            out.append(f"    gpus: {r.gpus}")
        for m in r.mounts:
            tag = " (checkpoints)" if m.checkpoint else ""
            out.append(f"    mount: {m.source} -> {m.destination}{tag}")
        if r.pod:
            out.append(f"    node: {r.node or '-'}, restarts: {r.restarts}")
            if r.last_termination:
                out.append(f"    last terminated: {r.last_termination}")
    if listing.toml:
        out += ["", "sleuth.toml, to read each one as a host:", *listing.toml]
    return out
