"""Transcript events into OpenTelemetry spans and metrics: the one converter that live export
and `sleuth export otel` share, so a run exported from its file gives the spans it gave live.

    converter = Converter(tracer, ids, resource, scope, path, content=False)
    for event in events:
        ended = converter.feed(event)      # spans go to the tracer's processor as they end;
    ended = converter.finish()             # a segment's metrics come back when it ends

The run is one trace (its id from the session id). Each segment (the run, then each `sleuth
resume` of it) is a span: `invoke_agent sleuth` when Sleuth's brain drove it, `sleuth tool
NAME` or `sleuth mcp` when a person or an MCP client did; later segments are children of the
first. Under a segment, each model turn is a `chat` span and each tool call an `execute_tool`
span (`tools/call NAME`, SERVER kind, in an MCP session), timed by the transcript: a span ends
when its event was recorded and starts its recorded latency or duration before. Approvals,
findings, errors and budget notices become span events. Content (the question, the model's
output, tool arguments and output) is exported only when asked for, and it is the transcript's
text: redacted before it was written. So are the names a model chose that are not Sleuth's
own (a tool no one registered, a host no one configured: `names.py`): without content a call
to one is `execute_tool` with `sleuth.tool.registered` or `sleuth.host.configured` false.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    set_span_in_context,
)

from sleuth.telemetry import ids
from sleuth.telemetry.conventions import (
    AGENT_BRAINS,
    AGENT_NAME,
    MCP_BRAIN,
    PROVIDERS,
    REMOTE_BRAINS,
)
from sleuth.telemetry.metrics import COST, DURATION, TOKEN_USAGE, Attributes, Point, metrics_data
from sleuth.telemetry.names import Names
from sleuth.telemetry.sdk import PlannedIds
from sleuth.transcripts.events import (
    ApprovalEvent,
    BudgetNotice,
    ErrorEvent,
    Event,
    FindingEvent,
    ModelTurn,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
)

ParentOf = Callable[[str, str], SpanContext | None]
"""(session id, call id) -> the caller's span a call continues (an MCP client's), if any."""
REPORT_FINDING = "report_finding"


def nanos(ts: str) -> int:
    """A transcript timestamp (UTC, milliseconds) as Unix nanoseconds."""
    when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return round(when.timestamp() * 1000) * 1_000_000


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class Segment:
    """The open segment: its span and what its end reports."""

    start: SessionStarted
    span: Span
    started_ns: int
    names: Names
    approvals: dict[str, ApprovalEvent] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    @property
    def context(self) -> SpanContext:
        return self.span.get_span_context()

    @property
    def provider(self) -> str | None:
        return PROVIDERS.get(self.start.brain)


class Converter:
    """One transcript's events, fed in order, into spans and metrics; thread-safe."""

    def __init__(
        self,
        tracer: Tracer,
        planned: PlannedIds,
        resource: Resource,
        scope: InstrumentationScope,
        path: str,
        content: bool = False,
        parent_of: ParentOf | None = None,
        tools: frozenset[str] = frozenset(),
    ) -> None:
        """`tools`: the registered tools' names, which leave without content."""
        self.tracer, self.planned, self.path, self.content = tracer, planned, path, content
        self.tools = tools
        self.resource, self.scope, self.parent_of = resource, scope, parent_of
        self.session_id = ""
        self.trace = 0
        self.first: SpanContext | None = None
        self.segment: Segment | None = None
        self.segments = 0
        self.last_ns = 0
        self.seen_calls: set[str] = set()
        self._lock = threading.Lock()

    def feed(self, event: Event) -> MetricsData | None:
        """Turn one event into what it ends; returns a segment's metrics when one ends."""
        with self._lock:
            when = nanos(event.ts) if event.ts else self.last_ns
            ended = None
            if isinstance(event, SessionStarted):
                ended = self._close(None, self.last_ns)
                self._begin(event, when)
            elif self.segment is not None:
                ended = self._within(self.segment, event, when)
            self.last_ns = max(self.last_ns, when)
            return ended

    def finish(self) -> MetricsData | None:
        """End a segment the transcript left open (a crash, a stop mid-run) at its last event."""
        with self._lock:
            return self._close(None, self.last_ns)

    def _within(self, seg: Segment, event: Event, when: int) -> MetricsData | None:
        if isinstance(event, ModelTurn):
            self._turn(seg, event, when)
        elif isinstance(event, ToolExecuted):
            self._call(seg, event, when)
        elif isinstance(event, ApprovalEvent):
            seg.approvals[event.call_id] = event
        elif isinstance(event, FindingEvent):
            self._finding(seg, event, when)
        elif isinstance(event, ErrorEvent):
            message = {"sleuth.error.message": event.message} if self.content else {}
            seg.span.add_event("sleuth.error", {"sleuth.error.where": event.where, **message}, when)
        elif isinstance(event, BudgetNotice):
            seg.span.add_event("sleuth.budget_notice", {"sleuth.budget.reason": event.reason}, when)
        elif isinstance(event, SessionEnded):
            return self._close(event, when)
        return None

    def _start(
        self,
        name: str,
        span: int,
        parent: SpanContext | None,
        kind: SpanKind,
        start: int,
        attributes: Attributes,
        links: list[Link] | None = None,
    ) -> Span:
        self.planned.plan(self.trace, span)
        context = set_span_in_context(NonRecordingSpan(parent)) if parent else Context()
        return self.tracer.start_span(
            name, context, kind, attributes, links, start_time=start, record_exception=False
        )

    def _begin(self, start: SessionStarted, when: int) -> None:
        if self.first is None:
            self.session_id = start.session_id
            self.trace = ids.trace_id(start.session_id)
        self.segments += 1
        span = self._start(
            _segment_name(start),
            ids.span_id(self.session_id, "segment", start.seq),
            self.first,
            SpanKind.INTERNAL,
            when,
            self._segment_attributes(start),
        )
        self.segment = Segment(start, span, when, Names.of(start, self.tools))
        self.first = self.first or span.get_span_context()

    def _segment_attributes(self, start: SessionStarted) -> Attributes:
        attrs: Attributes = {
            "gen_ai.conversation.id": self.session_id,
            "sleuth.brain": start.brain,
            "sleuth.segment": self.segments,
            "sleuth.hosts": [h.name for h in start.hosts],
            "sleuth.roots": [f"{h.name}:{root}" for h in start.hosts for root in h.roots],
            "sleuth.approval_mode": str(start.policy.get("approval", "")),
            "sleuth.transcript.path": self.path,
        }
        if start.brain in AGENT_BRAINS:
            attrs |= {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.agent.version": start.versions.get("sleuth", ""),
                "gen_ai.provider.name": PROVIDERS[start.brain],
            }
        if start.model:
            attrs["gen_ai.request.model"] = start.model
        if start.client:
            attrs["sleuth.mcp.client"] = (
                f"{start.client.get('name', '')} {start.client.get('version', '')}".strip()
            )
        if start.resumed_from:
            attrs["sleuth.resumed_from"] = start.resumed_from
        if self.content:
            message = {"role": "user", "parts": [{"type": "text", "content": start.question}]}
            attrs["gen_ai.input.messages"] = as_json([message])
        return attrs

    def _turn(self, seg: Segment, turn: ModelTurn, when: int) -> None:
        usage, model = turn.usage, seg.start.model
        input_tokens = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        attrs: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": self.session_id,
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "sleuth.turn": turn.turn,
            "sleuth.cost_usd": turn.cost_usd,
            "sleuth.request.messages": turn.request_messages,
            "sleuth.request.hash": turn.request_hash,
            "sleuth.retries": len(turn.retries),
        }
        metric: Attributes = {"gen_ai.operation.name": "chat"}
        if seg.provider:
            metric["gen_ai.provider.name"] = seg.provider
        if model:
            metric["gen_ai.request.model"] = model
        if turn.response.model:
            metric["gen_ai.response.model"] = turn.response.model
        if turn.response.stop_reason:
            attrs["gen_ai.response.finish_reasons"] = [turn.response.stop_reason]
        if self.content:
            attrs["gen_ai.output.messages"] = as_json([_output_message(turn)])
        attrs |= metric
        kind = SpanKind.CLIENT if seg.start.brain in REMOTE_BRAINS else SpanKind.INTERNAL
        start = when - round(turn.latency_s * 1e9)
        span_id = ids.span_id(self.session_id, "turn", turn.seq)
        span = self._start(
            f"chat {model}" if model else "chat", span_id, seg.context, kind, start, attrs
        )
        for retry in turn.retries:
            span.add_event(
                "sleuth.retry",
                {
                    "sleuth.retry.attempt": retry.attempt,
                    "sleuth.retry.reason": retry.reason,
                    "sleuth.retry.wait_s": retry.wait_s,
                },
                start,
            )
        span.end(when)
        seg.count("turns")
        seg.count("input_tokens", input_tokens)
        seg.count("output_tokens", usage.output_tokens)
        seg.cost_usd += turn.cost_usd
        seg.points += [
            Point(TOKEN_USAGE, input_tokens, {**metric, "gen_ai.token.type": "input"}),
            Point(TOKEN_USAGE, usage.output_tokens, {**metric, "gen_ai.token.type": "output"}),
            Point(DURATION, turn.latency_s, metric),
            Point(COST, turn.cost_usd, metric),
        ]

    def _call(self, seg: Segment, call: ToolExecuted, when: int) -> None:
        result = call.result
        mcp = seg.start.brain == MCP_BRAIN
        key = call.call_id if call.call_id not in self.seen_calls else f"{call.call_id}/{call.seq}"
        self.seen_calls.add(call.call_id)
        remote = self.parent_of(self.session_id, call.call_id) if self.parent_of else None
        tool = call.tool if self.content or call.tool in seg.names.tools else ""
        metric: Attributes = {"gen_ai.operation.name": "execute_tool"}
        if tool:
            metric["gen_ai.tool.name"] = tool
        if seg.provider:
            metric["gen_ai.provider.name"] = seg.provider
        attrs: Attributes = {
            **metric,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": self.session_id,
            "sleuth.call.refused": result.refused,
            "sleuth.bytes_cut": result.bytes_cut,
            "sleuth.commands": len(result.argv),
        }
        if not tool:
            attrs["sleuth.tool.registered"] = False
        if call.host and (self.content or call.host in seg.names.hosts):
            attrs["sleuth.host"] = call.host
        elif call.host:
            attrs["sleuth.host.configured"] = False
        if mcp:
            attrs["mcp.method.name"] = "tools/call"
        if result.exit_code is not None:
            attrs["sleuth.exit_code"] = result.exit_code
        if not result.ok:
            attrs["error.type"] = metric["error.type"] = result.error_kind or "failed"
        attrs |= _grounding(call) | _approval(seg.approvals.get(call.call_id))
        if self.content:
            attrs["gen_ai.tool.call.arguments"] = as_json(call.input)
            attrs["gen_ai.tool.call.result"] = result.output
            attrs["sleuth.argv"] = as_json(result.argv)
        span = self._start(
            f"{'tools/call' if mcp else 'execute_tool'} {tool}".strip(),
            ids.span_id(self.session_id, "call", key),
            remote or seg.context,
            SpanKind.SERVER if mcp else SpanKind.INTERNAL,
            when - round(result.duration_s * 1e9),
            attrs,
            [Link(seg.context)] if remote else None,
        )
        if (approval := seg.approvals.pop(call.call_id, None)) is not None:
            span.add_event("sleuth.approval", _approval(approval), nanos(approval.ts))
        if not result.ok:
            span.set_status(Status(StatusCode.ERROR, result.error_kind or "failed"))
        span.end(when)
        if call.tool != REPORT_FINDING:
            seg.count("tool_calls")
        seg.points.append(Point(DURATION, result.duration_s, metric))

    def _finding(self, seg: Segment, event: FindingEvent, when: int) -> None:
        finding = event.finding
        seg.count("findings")
        seg.count("findings.grounded" if finding.grounded else "findings.ungrounded")
        seg.count(f"verdict.{finding.verdict}")
        attrs: Attributes = {
            "sleuth.finding.call_id": event.call_id,
            "sleuth.finding.verdict": finding.verdict,
            "sleuth.finding.confidence": finding.confidence,
            "sleuth.finding.grounded": finding.grounded,
            "sleuth.finding.evidence": len(finding.evidence),
        }
        if self.content:
            attrs["sleuth.finding.claim"] = finding.claim
        seg.span.add_event("sleuth.finding", attrs, when)

    def _close(self, ended: SessionEnded | None, when: int) -> MetricsData | None:
        """End the open segment: with how the session ended, or unfinished (no end recorded)."""
        seg, self.segment = self.segment, None
        if seg is None:
            return None
        span = seg.span
        span.set_attribute("sleuth.status", ended.status if ended else "unfinished")
        for key, n in seg.counts.items():
            span.set_attribute(f"sleuth.{key}", n)
        span.set_attribute("sleuth.cost_usd", seg.cost_usd)
        if seg.start.brain in AGENT_BRAINS:
            span.set_attribute("gen_ai.usage.input_tokens", seg.counts.get("input_tokens", 0))
            span.set_attribute("gen_ai.usage.output_tokens", seg.counts.get("output_tokens", 0))
        if ended is not None:
            span.set_attribute("sleuth.transcript.head", ended.hash)
            if self.content and ended.summary:
                span.set_attribute(
                    "gen_ai.output.messages", as_json([_text("assistant", ended.summary)])
                )
            if ended.status == "error":
                span.set_attribute("error.type", "error")
                span.set_status(Status(StatusCode.ERROR, "the investigation ended in an error"))
        span.end(when)
        return metrics_data(seg.points, self.resource, self.scope, seg.started_ns, when)


def _segment_name(start: SessionStarted) -> str:
    if start.brain in AGENT_BRAINS:
        return f"invoke_agent {AGENT_NAME}"
    if start.brain == MCP_BRAIN:
        return "sleuth mcp"
    return start.question  # `sleuth tool NAME`: the command, as the session names itself


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def _output_message(turn: ModelTurn) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for block in turn.response.content:
        if block.type == "text" and block.text:
            parts.append({"type": "text", "content": block.text})
        elif block.type == "tool_use":
            parts.append(
                {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.input}
            )
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if turn.response.stop_reason:
        message["finish_reason"] = turn.response.stop_reason
    return message


def _approval(event: ApprovalEvent | None) -> Attributes:
    if event is None:
        return {}
    return {
        "sleuth.approval.approved": event.approved,
        "sleuth.approval.by": event.by,
        "sleuth.approval.rule": event.rule,
    }


def _grounding(call: ToolExecuted) -> Attributes:
    """report_finding's verdict on each quote: how many were found in the outputs they name."""
    if call.tool != REPORT_FINDING or not isinstance(call.result.data, dict):
        return {}
    quotes = [q for q in call.result.data.get("quotes", []) if isinstance(q, dict)]
    grounded = sum(1 for q in quotes if q.get("grounded"))
    return {
        "sleuth.grounding.quotes": len(quotes),
        "sleuth.grounding.grounded": grounded,
        "sleuth.grounding.ungrounded": len(quotes) - grounded,
    }
