"""Opening an investigation: describe the hosts, write session_started, build the loop.

```python
inv = start_investigation(question, brain, ctx, settings, Path("transcripts"))
result = inv.run()
```
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.budget import price_for
from sleuth.agent.calls import Call, CallPipeline
from sleuth.agent.findings import Grounder, report_finding_spec
from sleuth.agent.fleet.view import FleetView
from sleuth.agent.history import opening_message
from sleuth.agent.loop import Investigation
from sleuth.agent.protocols import Brain, Observer, Quiet
from sleuth.config import Settings
from sleuth.errors import HostError
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import all_tools
from sleuth.transcripts.events import (
    BrainOptions,
    HostInfo,
    SessionEnded,
    SessionStarted,
    ToolSpec,
    Totals,
)
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter, canonical_json

if TYPE_CHECKING:  # a run that signs imports the SSH stack, `sleuth tool` never does
    from sleuth.transcripts.seal import Seal

VERSIONED = ("sleuth", "anthropic", "paramiko", "pydantic")


def tool_specs(references: bool = True) -> list[ToolSpec]:
    """Every registered tool plus report_finding, in a stable order (it keeps the cache warm).
    `references`: report_finding's evidence may cite lines as well as quote."""
    specs = [
        ToolSpec(
            name=t.name,
            description=t.description,
            input_schema=t.input_schema(),
            mutating=t.mutating,
        )
        for t in sorted(all_tools().values(), key=lambda t: t.name)
    ]
    return [*specs, report_finding_spec(references)]


def sha256_of(value: Any) -> str:
    """sha256 hex of a string, or of the canonical JSON of anything else."""
    text = value if isinstance(value, str) else canonical_json(value)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tools_hash(tools: list[ToolSpec]) -> str:
    return sha256_of([t.model_dump(mode="json") for t in tools])


def versions() -> dict[str, str]:
    found = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def describe_hosts(ctx: ToolContext) -> list[HostInfo]:
    """Each host as resolved; an SSH host that cannot be reached says why in its address.
    Hosts are reached concurrently (`[fleet] concurrency` at once): this is where a run
    connects to each host, once, and the connection is reused by every call after it. Each
    host starts one process here, Sleuth's program, which resolves the roots too: every
    process started over SSH runs the login shell's start-up files first."""
    names = list(ctx.hosts)
    with ThreadPoolExecutor(max(1, min(ctx.fleet.concurrency, len(names)))) as pool:
        return list(pool.map(lambda name: _describe(ctx, name), names))


def _describe(ctx: ToolContext, name: str) -> HostInfo:
    sandbox = ctx.hosts[name]
    info = HostInfo(
        name=name,
        address=name,
        roots=list(sandbox.config.roots),
        allow=list(sandbox.config.allow),
        ssh=sandbox.config.ssh or "",
    )
    try:
        facts = sandbox.host.identify()
    except HostError as exc:
        info.address = f"unreachable: {exc}"
        return info
    info.call_mode = facts.call_mode
    info.container = dict(facts.container)
    if facts.container:
        info.address = facts.address
    elif facts.address:  # this machine has none, and keeps its name
        info.address = f"{facts.user}@{facts.address}"
        info.fingerprint = facts.host_key_fingerprint
    info.real_roots = sandbox.roots_as_resolved()
    return info


def host_groups(ctx: ToolContext) -> dict[str, list[str]]:
    """The groups a fleet call may name, as session_started records them."""
    return {name: list(group.members) for name, group in ctx.groups.items() if group.members}


def brain_options(brain: Brain) -> BrainOptions:
    """What the brain was built with beyond its provider and model, read from the brain as
    built (a brain lacks the settings it has no use for), so a resume can build it again."""
    fields = BrainOptions.model_fields
    return BrainOptions.model_validate({name: getattr(brain, name, None) for name in fields})


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


def start_investigation(
    question: str,
    brain: Brain,
    ctx: ToolContext,
    settings: Settings,
    transcripts: Path,
    *,
    observer: Observer | None = None,
    approval_mode: str = "deny",
    seal: Seal | None = None,
    references: bool = True,
) -> Investigation:
    """Write session_started and build the run; `seal` signs the transcript and records its
    end in the ledger. `references=False` offers quotes only (to measure what citing lines
    changes for a model)."""
    session_id = new_session_id()
    writer = TranscriptWriter.create(transcripts, session_id, seal)
    hosts = describe_hosts(ctx)
    tools = tool_specs(references)
    price = price_for(brain.model, settings.prices)
    system = system_prompt()
    policy = {
        "limits": settings.limits.model_dump(),
        "approval": approval_mode,
        # None for a model with no price: its cost is not tracked, and this says so.
        "price": price.model_dump() if price else None,
    }
    options = brain_options(brain)
    params = {
        "brain": brain.name,
        "model": brain.model,
        "options": options.model_dump(),
        "policy": policy,
    }
    start = SessionStarted(
        session_id=session_id,
        question=question,
        hosts=hosts,
        brain=brain.name,
        model=brain.model,
        policy=policy,
        budget=settings.budget.model_dump(),
        versions=versions(),
        tools=tools,
        system_hash=sha256_of(system),
        tools_hash=tools_hash(tools),
        params_hash=sha256_of({**params, "budget": settings.budget.model_dump()}),
        brain_options=options,
        groups=host_groups(ctx),
    )
    writer.append(start)
    return Investigation(
        brain=brain,
        ctx=ctx,
        writer=writer,
        system=system,
        tools=tools,
        messages=[opening_message(question, hosts, start.groups)],
        budget=settings.budget,
        question=question,
        hosts=hosts,
        price=price,
        observer=observer or Quiet(),
        grounder=Grounder(references),
        session_id=session_id,
        fleet=FleetView.of(start),
    )


CLI_CALL_ID = "cli_1"


def run_cli_call(
    transcripts: Path,
    ctx: ToolContext,
    name: str,
    inputs: dict[str, Any],
    run: Callable[[ToolContext], ToolResult] | None = None,
    seal: Seal | None = None,
    session_id: str | None = None,
) -> tuple[ToolResult, Path]:
    """A one-call transcript for `sleuth tool`: a person's call goes through the call pipeline
    and is audited like a model's. A command that runs the tool itself (`sleuth bench`, whose
    request headers are no input) passes how to `run` it, and the `session_id` it traced the
    run under: what the tool calls of other tools (bench ab's relaunches) takes the pipeline
    too, and the result is redacted and recorded the same way. A `seal` signs the transcript
    and enters it in the ledger. Returns the result as recorded, and the transcript."""
    session_id = session_id or new_session_id()
    spec = [s for s in tool_specs() if s.name == name]
    with TranscriptWriter.create(transcripts, session_id, seal) as writer:
        start = SessionStarted(
            session_id=session_id,
            question=f"sleuth tool {name}",
            hosts=describe_hosts(ctx),
            brain="cli",
            policy={"limits": ctx.limits.model_dump()},
            versions=versions(),
            tools=spec,
            tools_hash=tools_hash(spec),
            groups=host_groups(ctx),
        )
        writer.append(start)
        calls = CallPipeline(ctx, writer.append, session_id=session_id, fleet=FleetView.of(start))
        call = Call(CLI_CALL_ID, name, inputs)
        done = calls.tool(call, 0) if run is None else calls.ran(call, run)
        writer.append(
            SessionEnded(
                status="answered" if done.ok else "error",
                summary=f"{name}: {'ok' if done.ok else done.error}",
                totals=Totals(tool_calls=1, wall_s=done.duration_s),
            )
        )
    return done, writer.path
