"""The fan-out of a fleet call: one tool on every host of a group, each host's call through the
one call pipeline, the answers grouped by agreement.

```python
result = run_fleet(pipeline, ctx, Call("toolu_1", "python_env", {"host": "@decode"}), turn=2)
result.data      # a FleetResult: the majority, each outlier with a diff, failed, unreachable
```

Each host's part is its own call (`toolu_1@gpu-07`): validated, decided (a mutating tool only
under a rule that names the group), executed by the pipeline's executor (live, or the
recorded answer in a replay), redacted and recorded as a `tool_executed` whose `fleet` names
the fleet call, as soon as it arrives. At most `[fleet] concurrency` hosts run at once; a host
that has not answered `host_timeout_s` after its call began is reported as timed out. The
fleet call's own event, with the grouped result, comes last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sleuth.agent.findings import CallRecord
from sleuth.agent.fleet.grouping import Grouping, fleet_text
from sleuth.agent.fleet.normalise import Masker, localise
from sleuth.agent.fleet.view import FleetPart, FleetView
from sleuth.errors import ErrorKind, KindedError
from sleuth.tools.context import ToolContext
from sleuth.tools.results import cap_output
from sleuth.transcripts.fleet import FleetResult, part_id
from sleuth.transcripts.results import ToolResult

if TYPE_CHECKING:
    from sleuth.agent.calls import Call, CallPipeline

POLL_S = 0.5
"""How often the fan-out looks for a host past its time."""


def run_fleet(
    pipeline: CallPipeline, ctx: ToolContext, call: Call, turn: int | Callable[[], int]
) -> ToolResult:
    """Run `call` (its host `@GROUP`) on every member; the grouped result, recorded."""
    began = time.monotonic()
    view = pipeline.fleet
    try:
        if view is None:
            raise KindedError(
                "this session has no host groups: start it with --hosts GROUP",
                ErrorKind.UNKNOWN_HOST,
            )
        members = view.members(call.host[1:])
    except KindedError as exc:
        return pipeline.answered(call, ToolResult.failure(str(exc), exc.kind), turn)
    admitted = pipeline.admit(ctx, call)
    if isinstance(admitted, ToolResult):
        return pipeline.answered(call, admitted, turn)
    fan = _FanOut(pipeline, ctx, view, call, list(members))
    fan.run()
    fleet = fan.grouping.result()
    result = _grouped(fleet, view, time.monotonic() - began)
    made_in = turn() if callable(turn) else turn
    for record in fan.records:
        pipeline.grounder.record(replace(record, turn=made_in))
    return pipeline.answered(call, result, made_in)


def _grouped(fleet: FleetResult, view: FleetView, seconds: float) -> ToolResult:
    limits = view.limits
    text, cut = cap_output(fleet_text(fleet), limits.max_output_bytes, limits.max_output_lines)
    answered = fleet.answers()
    if answered:
        return ToolResult(
            ok=True,
            output=text,
            data=fleet.model_dump(mode="json"),
            bytes_cut=cut,
            duration_s=seconds,
        )
    lost = fleet.groups[0] if fleet.groups else None
    kind = (lost.error_kind if lost is not None else None) or ErrorKind.FAILED
    return ToolResult(
        ok=False,
        output=text,
        error=f"no host of {fleet.group} answered {fleet.tool}"
        + (f": {lost.output.splitlines()[0] if lost.output else ''}" if lost else ""),
        error_kind=kind,
        data=fleet.model_dump(mode="json"),
        bytes_cut=cut,
        duration_s=seconds,
    )


@dataclass
class _FanOut:
    pipeline: CallPipeline
    ctx: ToolContext
    view: FleetView
    call: Call
    members: list[str]

    def __post_init__(self) -> None:
        self.grouping = Grouping(self.call.host, self.call.tool, self.members)
        self.records: list[CallRecord] = []
        """Each host's output for the grounding check, registered once the call's turn is
        known (an MCP call's turn is the moment it returns)."""
        self._began: dict[str, float] = {}
        self._lock = threading.Lock()

    def run(self) -> None:
        group = self.call.host[1:]
        parts = [
            replace(
                self.call,
                call_id=part_id(self.call.call_id, host),
                input=localise({**self.call.input, "host": host}, self.view.hosts.get(host)),
                part_of=FleetPart(self.call.call_id, group),
            )
            for host in self.members
        ]
        workers = max(1, min(self.ctx.fleet.concurrency, len(parts)))
        pool = ThreadPoolExecutor(workers, thread_name_prefix=f"fleet-{self.call.call_id}")
        try:
            futures = {pool.submit(self._answer, part): part for part in parts}
            self._collect(futures)
        finally:
            # A host past its time keeps its thread until its own command times out; nothing
            # it returns is used or recorded.
            pool.shutdown(wait=False, cancel_futures=True)

    def _answer(self, part: Call) -> ToolResult:
        with self._lock:
            self._began[part.host] = time.monotonic()
        return self.pipeline.answer(self.ctx, part)

    def _collect(self, futures: dict[Future[ToolResult], Call]) -> None:
        limit = self.ctx.fleet.host_timeout_s
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=min(POLL_S, limit), return_when=FIRST_COMPLETED)
            for future in done:
                self._settle(futures[future], future.result())
            now = time.monotonic()
            with self._lock:
                late = [f for f in pending if now - self._began.get(futures[f].host, now) > limit]
            for future in late:
                pending.discard(future)
                self._settle(futures[future], _timed_out(futures[future].host, limit))

    def _settle(self, part: Call, result: ToolResult) -> None:
        """Redact and record one host's answer now; keep only what grouping and grounding
        need."""
        result = self.pipeline.settle(part, result)
        mask = Masker.for_host(self.view.hosts.get(part.host), part.host)
        # Each host's output is held once, for the grounding check; its masked form is kept
        # only where it stands for a group.
        self.grouping.add(
            part.host, result, mask(result.output if result.ok else result.error or "")
        )
        self.records.append(
            CallRecord(
                part.call_id,
                part.tool,
                part.input,
                result.output,
                result.ok,
                0,
                mask=mask,
                fleet_call=self.call.call_id,
            )
        )


def _timed_out(host: str, limit: float) -> ToolResult:
    return ToolResult.failure(
        f"host {host!r} did not answer within {limit:g} s ([fleet] host_timeout_s); its "
        "answer, if it comes, is not used",
        ErrorKind.TIMEOUT,
    )
