"""THE call pipeline: every tool call, whoever makes it, takes this one path.

```python
calls = CallPipeline(ctx, writer.append)                  # live: the registry's tool function
result = calls.tool(Call("toolu_1", "read_lines", {"path": "README.md"}), turn=1)
outcome = calls.report(Call("toolu_2", "report_finding", {...}), turn=2)
calls.keep_unmended()                                     # at the end of the run
```

validate the arguments -> decide consent (the host's rules, then whoever may answer) ->
execute -> redact (text, then structured data, keys and values) -> ground (the grounding
check keeps the redacted output) -> record (`approval` and `tool_executed` events).

The loop (`turn_calls`), the MCP server (`mcp/session.py`), `sleuth tool`, replay and resume
all call it; `run_live` below is the one place a tool's function is called. What differs
between callers is a parameter, not a copy of the handling: the `executor` (live, the
recorded result, live and compared) and the `consent` (live rules and approver, or the
recorded decision when a replay answers from a transcript).

A call whose host is a group (`host="@decode"`) is a fleet call: `agent/fleet/run.py` sends
each member's part through these same steps and groups the answers.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import ValidationError

from sleuth.agent.findings import REPORT_FINDING, CallRecord, Grounder, Outcome
from sleuth.agent.fleet.consent import by_group_rule, fleet_consent
from sleuth.agent.fleet.run import run_fleet
from sleuth.agent.fleet.view import FleetPart, FleetView
from sleuth.agent.records import approval_event, tool_event
from sleuth.config import HostConfig
from sleuth.errors import ErrorKind, KindedError
from sleuth.tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    Approver,
    decide,
    rule_approval,
    shown_input,
)
from sleuth.tools.context import ToolContext
from sleuth.tools.interpreters import found_on_host
from sleuth.tools.registry import Tool, ToolInput, get_tool, validation_text
from sleuth.transcripts.events import ErrorEvent, Event, Finding, FindingEvent, ToolExecuted
from sleuth.transcripts.fleet import is_fleet_host
from sleuth.transcripts.redact import redact, redact_data
from sleuth.transcripts.results import ToolResult

Recorder = Callable[[Event], object]
"""Appends one event to the caller's transcript (a writer's `append`, or a queue to it)."""


@dataclass(frozen=True)
class Call:
    """One call as its caller received it: the id a finding quotes it by, the tool, the input."""

    call_id: str
    tool: str
    input: dict[str, Any]
    parent: str | None = None
    """The caller's W3C traceparent (an MCP client's): the call's span continues its trace."""
    part_of: FleetPart | None = None
    """Set for one host's part of a fleet call."""

    @property
    def host(self) -> str:
        return str(self.input.get("host", "local"))

    @property
    def group(self) -> str:
        """The group a fleet call, or a part of one, acts on; "" for an ordinary call."""
        if self.part_of is not None:
            return self.part_of.group
        return self.host[1:] if is_fleet_host(self.host) else ""


class Executor(Protocol):
    """Where the result of a valid call with consent comes from."""

    def __call__(self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult: ...


Approval = tuple[ApprovalRequest, ApprovalDecision]


class Consent(Protocol):
    """Decides a mutating call: its request and decision, or None when there is nothing to
    decide (a replay whose recording holds no decision for the call)."""

    def __call__(
        self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call
    ) -> Approval | None: ...


def run_live(ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> ToolResult:
    """The registry's tool function, run: the one place Sleuth calls a tool's function. A
    failure becomes a result with its kind; a bug, an `internal` result with its traceback."""
    start = time.monotonic()
    try:
        result = spec.fn(ctx, args)
    except KindedError as exc:
        result = ToolResult.failure(str(exc), exc.kind)
    except Exception as exc:  # a bug in a tool must not end the investigation, nor hide
        result = ToolResult.failure(
            f"internal error in {spec.name} (a bug in Sleuth): {type(exc).__name__}: {exc}",
            ErrorKind.INTERNAL,
            traceback=traceback.format_exc(),
        )
    if not result.duration_s:
        result.duration_s = time.monotonic() - start
    return result


def approval_request(ctx: ToolContext, spec: Tool, args: ToolInput) -> ApprovalRequest:
    """What a call asks consent for, from its inputs and the host's configuration alone:
    nothing the model supplied is run, probed or stat'ed on the host first. Raises
    PolicyError when the host does not allow a mutating tool at all."""
    sandbox = ctx.host(args.host)
    if spec.mutating:
        sandbox.check_allowed(spec.name)
    return request_for(spec, args, sandbox.config)


def request_for(
    spec: Tool, args: ToolInput, config: HostConfig, rules_from: str = ""
) -> ApprovalRequest:
    """The request for `args` under `config`'s rules, or a group's (`rules_from`): the
    planned argv (a model-chosen interpreter's, where the tool cannot say more) and the
    environment names."""
    raw = args.model_dump()
    python = args.chosen_python()
    argv = spec.argv(config, args) if spec.argv else ([python] if python else None)
    env = raw.get("env")
    return ApprovalRequest(
        tool=spec.name,
        host=args.host,
        input=shown_input(raw),
        argv=argv,
        env=sorted(env) if isinstance(env, dict) else [],
        rules=config.approve,
        program=python,
    )


def names_program(spec: Tool, args: ToolInput) -> bool:
    """Whether a call needs consent: a mutating tool, or any tool given an interpreter."""
    return spec.mutating or args.chosen_python() is not None


def live_consent(ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> Approval | None:
    """The host's rules and the context's approver decide; for a fleet call, the group's
    rules alone. A read-only call that names the host's configured interpreter has nothing to
    decide; one that names another runs on a `commands` rule, on the host's word that it is
    an interpreter Sleuth could have found itself, or on the approver's yes (never `--yes`)."""
    if not spec.mutating:
        return program_consent(ctx, spec, args, call)
    if call.group:
        return fleet_consent(ctx, spec, args, call.group)
    request = approval_request(ctx, spec, args)
    return request, decide(request, ctx.approver)


def program_consent(ctx: ToolContext, spec: Tool, args: ToolInput, call: Call) -> Approval | None:
    """Consent for a read-only call given its own interpreter (see `live_consent`)."""
    standing = standing_program_consent(ctx, spec, args, call.group)
    if standing is None:
        return None
    request, decided, why = standing
    if decided is not None:
        return request, decided
    group = ctx.groups.get(call.group) if call.group else None
    decided = (
        decide(request, ctx.approver)
        if group is None
        else by_group_rule(request, len(group.members))
    )
    if decided.approved:
        return request, decided
    note = f"; host {request.host!r} does not vouch for {request.program}: {why}"
    return request, decided.model_copy(update={"reason": decided.reason + note})


def standing_program_consent(
    ctx: ToolContext, spec: Tool, args: ToolInput, group_name: str = ""
) -> tuple[ApprovalRequest, ApprovalDecision | None, str] | None:
    """For a read-only call given an interpreter: None when it is the host's configured one
    (nothing to decide); else its request, the decision no one need be asked for (a
    `commands` rule, or the host vouching for it) or None, and why the host does not."""
    if is_fleet_host(args.host):
        return None  # each member's part is decided on its own host
    sandbox = ctx.host(args.host)
    if args.chosen_python() in (None, sandbox.config.python):
        return None
    request = request_for(spec, args, sandbox.config)
    if (group := ctx.groups.get(group_name) if group_name else None) is not None:
        rules_from = f"groups.{group_name}.approve"
        request = request.model_copy(update={"rules": group.approve, "rules_from": rules_from})
    if (ruled := rule_approval(request)) is not None:
        return request, ruled, ""
    found, why = found_on_host(sandbox, str(request.program))
    return request, found, why


def redacted(result: ToolResult) -> ToolResult:
    """The result as it may leave the process: its text, then its structured data (keys and
    values), through the one redactor of each."""
    texts = {
        "output": redact(result.output),
        "error": redact(result.error) if result.error is not None else None,
        "traceback": redact(result.traceback) if result.traceback is not None else None,
    }
    data = {"data": redact_data(result.data), "argv": redact_data(result.argv)}
    return result.model_copy(update={**texts, **data})


@dataclass
class CallPipeline:
    """Runs, redacts, grounds and records calls for one transcript; safe across threads."""

    ctx: ToolContext
    record: Recorder | None = None
    """Where the events go; None for a call nobody records (`sleuth servers`, a benchmark)."""
    grounder: Grounder = field(default_factory=Grounder)
    executor: Executor = run_live
    consent: Consent = live_consent
    findings: list[Finding] = field(default_factory=list)
    session_id: str = ""
    """The transcript's session id: with the context's tracing, it names each call's span."""
    fleet: FleetView | None = None
    """The groups and hosts fleet calls may reach (None: a session without groups)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def tool(
        self, call: Call, turn: int | Callable[[], int], approver: Approver | None = None
    ) -> ToolResult:
        """Run one tool call through every step; the result is redacted. `turn` is the model
        turn that made it (or, for a caller that learns it only once the call returns, how to
        find it then): a finding may quote the call from the next turn on. `approver` decides
        this call instead of the context's (an MCP client's answer belongs to its own call)."""
        ctx = self.ctx if approver is None else replace(self.ctx, approver=approver)
        ctx = replace(ctx, subcall=self._subcalls(call, turn, approver))
        if (traceparent := self._traceparent(call)) is not None:
            ctx = replace(ctx, traceparent=traceparent)
        if call.part_of is None and is_fleet_host(call.host):
            return run_fleet(self, ctx, call, turn)
        return self.answered(call, self.answer(ctx, call), turn)

    def _subcalls(
        self, parent: Call, turn: int | Callable[[], int], approver: Approver | None
    ) -> Callable[[str, dict[str, Any]], ToolResult]:
        """The calls a tool makes of other tools take this same path, each with its own id
        (`PARENT.1`, `PARENT.2`...), consent and record."""
        numbers = itertools.count(1)

        def subcall(name: str, raw: dict[str, Any]) -> ToolResult:
            child = Call(f"{parent.call_id}.{next(numbers)}", name, raw)
            return self.tool(child, turn, approver)

        return subcall

    def ran(
        self, call: Call, run: Callable[[ToolContext], ToolResult], turn: int = 0
    ) -> ToolResult:
        """A call a command runs itself, because its inputs carry what the tool's schema must
        not (`sleuth bench`'s request headers): the calls it makes of other tools take this
        path with their own ids, and its result is redacted and recorded like any other."""
        ctx = replace(self.ctx, subcall=self._subcalls(call, turn, None))
        return self.answered(call, run(ctx), turn)

    def answered(self, call: Call, result: ToolResult, turn: int | Callable[[], int]) -> ToolResult:
        """The steps after execution, for a result in hand: redact, ground, record. The loop
        sends a call it does not run (the budget is spent, its arguments are not JSON) here."""
        result = self.settle(call, result)
        made_in = turn() if callable(turn) else turn
        record = CallRecord(call.call_id, call.tool, call.input, result.output, result.ok, made_in)
        self.grounder.record(record)
        return result

    def settle(self, call: Call, result: ToolResult) -> ToolResult:
        """Redact and record a result (a fleet call grounds its parts once its turn is known)."""
        result = redacted(result)
        fleet = call.part_of.call_id if call.part_of else None
        self._record(tool_event(call.call_id, call.tool, call.input, result, fleet))
        if result.traceback:  # a bug, not a failed call: say so, and keep where it happened
            message = f"{call.call_id} {result.error}\n{result.traceback}"
            self._record(ErrorEvent(where="tool", message=message))
        return result

    def report(self, call: Call, turn: int) -> Outcome:
        """report_finding: the grounding check decides, and the call and its finding (once kept)
        are recorded like any other call."""
        self._traceparent(call)
        outcome = self.grounder.report(call.call_id, call.input, turn)
        quotes = [q.model_dump(mode="json") for q in outcome.quotes]
        result = ToolResult(
            ok=not outcome.is_error,
            output=outcome.feedback,
            error_kind=outcome.kind,
            data={"quotes": quotes},
        )
        self._record(
            ToolExecuted(call_id=call.call_id, tool=REPORT_FINDING, input=call.input, result=result)
        )
        if outcome.finding is not None:
            self.keep(call.call_id, outcome.finding)
        return outcome

    def keep(self, call_id: str, finding: Finding) -> None:
        with self._lock:
            self.findings.append(finding)
        self._record(FindingEvent(call_id=call_id, finding=finding))

    def keep_unmended(self) -> None:
        """At the end of a run, findings still waiting for a mend are kept as they are."""
        for call_id, finding in self.grounder.unmended():
            self.keep(call_id, finding)

    def _traceparent(self, call: Call) -> str | None:
        """The call's span, named before it runs (telemetry on): its requests carry it."""
        tracing = self.ctx.tracing
        if tracing is None:
            return None
        return tracing.traceparent(self.session_id, call.call_id, call.parent)

    def answer(self, ctx: ToolContext, call: Call) -> ToolResult:
        """Validate, decide and execute one call; the result is not yet redacted."""
        admitted = self.admit(ctx, call)
        if isinstance(admitted, ToolResult):
            return admitted
        return self.executor(ctx, *admitted, call)

    def admit(self, ctx: ToolContext, call: Call) -> tuple[Tool, ToolInput] | ToolResult:
        """The tool and its validated input, or the result of a call that may not run (invalid,
        refused, not approved)."""
        try:
            spec = get_tool(call.tool)
            args = spec.input_model.model_validate(call.input)
            needs = names_program(spec, args)
            if needs and (refusal := self._consent(ctx, spec, args, call)) is not None:
                return refusal
        except ValidationError as exc:
            return ToolResult.failure(validation_text(call.tool, exc), ErrorKind.INVALID_INPUT)
        except KindedError as exc:
            return ToolResult.failure(str(exc), exc.kind)
        except Exception as exc:  # an approver's bug: the call is refused, and says where
            return ToolResult.failure(
                f"internal error deciding {call.tool} (a bug in Sleuth): {type(exc).__name__}: "
                f"{exc}",
                ErrorKind.INTERNAL,
                traceback=traceback.format_exc(),
            )
        return spec, args

    def _consent(
        self, ctx: ToolContext, spec: Tool, args: ToolInput, call: Call
    ) -> ToolResult | None:
        """The refusal, or None when the call may run."""
        decided = self.consent(ctx, spec, args, call)
        if decided is None:
            return None
        request, decision = decided
        if ctx.on_approval is not None:
            ctx.on_approval(request, decision)
        self._record(approval_event(call.call_id, request, decision))
        if decision.approved:
            return None
        return ToolResult.failure(
            f"{spec.name} on {args.host!r} was not approved: {decision.reason}",
            ErrorKind.NOT_APPROVED,
        )

    def _record(self, event: Event) -> None:
        if self.record is not None:
            self.record(event)


def execute(ctx: ToolContext, name: str, raw: dict[str, Any], call_id: str = "") -> ToolResult:
    """One call through the pipeline, recorded nowhere: for a command that shows a result it
    does not keep (`sleuth servers`) and for benchmarks."""
    return CallPipeline(ctx).tool(Call(call_id, name, raw), 0)
