"""Replay a recorded investigation through the same loop: offline, or live against today's hosts.

```python
result = replay(Path("transcripts/mtp-heads.jsonl"))          # recorded turns, recorded tools
assert result.ok and result.findings == result.recorded_findings
drift = replay(path, live_ctx=build_context(settings, ["gpu1"]))  # recorded turns, real tools
```

Offline, every tool call is answered from its `tool_executed` event, so the
loop, the grounding check and the budget run again on the recorded data. The
same calls must come in the same order with the same inputs, each
report_finding must get the answer it got, and the same findings must result;
the first difference stops the replay with a `Divergence`.

Live, the recorded model turns still drive the calls, but the tools run for
real. Each call whose output differs from the recording is reported with a
diff, and each recorded finding's quotes are checked against today's outputs:
a finding whose quotes are gone no longer holds (drift).
"""

from __future__ import annotations

import difflib
import json
import threading
from collections import defaultdict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.budget import price_for
from sleuth.agent.findings import REPORT_FINDING, CallRecord, QuoteGrounding, ground_quote
from sleuth.agent.history import opening_message
from sleuth.agent.loop import Investigation, Stop
from sleuth.agent.protocols import Brain, BrainReply, Request
from sleuth.agent.session import sha256_of, tool_specs, tools_hash
from sleuth.config import Budget, Settings
from sleuth.tools.context import ToolContext
from sleuth.tools.registry import ApprovalHook, execute
from sleuth.tools.results import ToolResult
from sleuth.transcripts.events import (
    Event,
    Finding,
    SessionStarted,
    SessionStatus,
    ToolExecuted,
    Totals,
)
from sleuth.transcripts.recording import NotARecording, Recording, Turn, read
from sleuth.transcripts.redact import redact
from sleuth.transcripts.store import TranscriptWriter, canonical_json, load
from sleuth.transcripts.verify import not_verified, verify

DIFF_LINES = 40
DIFF_CHARS = 4000

DivergenceKind = Literal["calls", "conversation", "report", "findings", "turns", "status"]


class Divergence(BaseModel):
    """The first place a replay did not do what the recording did."""

    kind: DivergenceKind
    step: int
    """The model turn (1-based) where it happened; 0 when it is about the run as a whole."""
    call_id: str = ""
    tool: str = ""
    expected: Any = None
    actual: Any = None
    diff: str = ""
    cause_call_id: str = ""
    """For a report that changed: the earlier call whose recorded output no longer holds a quote."""
    message: str

    def describe(self) -> str:
        where = f"step {self.step}" + (
            f", call {self.call_id} ({self.tool})" if self.call_id else ""
        )
        text = f"DIVERGED at {where}: {self.message}"
        return text + ("\n" + self.diff if self.diff else "")


class CallDrift(BaseModel):
    """One call run live, compared with its recorded output."""

    step: int
    call_id: str
    tool: str
    host: str
    same: bool
    recorded_ok: bool
    ok: bool
    diff: str = ""


class QuoteCheck(BaseModel):
    call_id: str
    quote: str
    grounded: bool


class FindingDrift(BaseModel):
    """A recorded finding's quotes, checked again against today's outputs."""

    claim: str
    was_grounded: bool
    holds: bool
    quotes: list[QuoteCheck]


class PromptDrift(BaseModel):
    part: Literal["system prompt", "tool schemas"]
    recorded_hash: str
    today_hash: str


class ReplayResult(BaseModel):
    transcript: str
    mode: Literal["offline", "live"]
    status: SessionStatus
    recorded_status: SessionStatus | None
    """None when the recording never ended (a crash)."""
    turns: int
    recorded_turns: int
    findings: list[Finding]
    recorded_findings: list[Finding]
    divergence: Divergence | None = None
    calls: list[CallDrift] = Field(default_factory=list)
    finding_drift: list[FindingDrift] = Field(default_factory=list)
    prompt_drift: list[PromptDrift] = Field(default_factory=list)
    """What the model would be sent differently today: the system prompt or the tool schemas
    changed since the recording. A note, not a failure: the recorded turns still replay."""
    wall_s: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def drifted(self) -> bool:
        """Some call's output or some finding's grounding changed since the recording."""
        return any(not c.same for c in self.calls) or any(
            f.was_grounded and not f.holds for f in self.finding_drift
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """No divergence and no drift: the recording still stands."""
        return self.divergence is None and not self.drifted


class ReplayError(Exception):
    """The transcript cannot be replayed at all (no session_started, unreadable file)."""


class Diverged(Exception):
    """Raised inside the loop to stop it at the first difference; not a loop Stop, so it escapes."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.describe())
        self.divergence = divergence


class RecordingEnded(Stop):
    """The recording stops here (a session that crashed): the replay ends with it."""

    status: SessionStatus = "interrupted"


def read_recording(path: Path, events: Sequence[Event] | None = None) -> Recording:
    """The transcript at `path` read by the one reader; ReplayError when it has no start."""
    try:
        return read(load(path).events if events is None else events)
    except NotARecording as exc:
        raise ReplayError(f"{path}: {exc}; it cannot be replayed") from exc


class ReplayBrain:
    """Feeds the recording's model turns back in order, checking the conversation keeps pace."""

    name = "replay"

    def __init__(self, recording: Recording, cursor: _Cursor) -> None:
        self.model = recording.start.model
        self._recording = recording
        self._cursor = cursor

    def complete(self, request: Request) -> BrainReply:
        turn = self._cursor.advance(self._recording)
        expected = turn.event.request_messages
        if len(request.messages) != expected:
            raise Diverged(
                Divergence(
                    kind="conversation",
                    step=turn.event.turn,
                    expected=expected,
                    actual=len(request.messages),
                    message=f"the conversation has {len(request.messages)} messages where the "
                    f"recording sent {expected}",
                )
            )
        return BrainReply(
            response=turn.event.response.model_copy(deep=True),
            usage=turn.event.usage,
            request_hash=turn.event.request_hash,
        )


class CheckedBrain:
    """Asks another brain (a playbook, say) and stops at the first call that differs from the
    recording: a different tool, input, id or order."""

    def __init__(self, inner: Brain, recording: Recording, cursor: _Cursor) -> None:
        self.inner, self._recording, self._cursor = inner, recording, cursor
        self.name, self.model = inner.name, inner.model

    def complete(self, request: Request) -> BrainReply:
        turn = self._cursor.advance(self._recording)
        reply = self.inner.complete(request)
        blocks = reply.response.content
        actual = [(b.id or "", b.name or "", b.input or {}) for b in blocks if b.type == "tool_use"]
        check_calls(turn.event.turn, turn.calls, actual)
        return reply


def check_calls(
    step: int,
    expected: list[tuple[str, str, dict[str, Any]]],
    actual: list[tuple[str, str, dict[str, Any]]],
) -> None:
    """Raise Diverged at the first call that differs in id, tool, input or place."""
    for i in range(max(len(expected), len(actual))):
        want = expected[i] if i < len(expected) else None
        got = actual[i] if i < len(actual) else None
        if want == got:
            continue
        call_id, tool = (want or got or ("", "", {}))[:2]
        raise Diverged(
            Divergence(
                kind="calls",
                step=step,
                call_id=call_id,
                tool=tool,
                expected=_call_dict(want),
                actual=_call_dict(got),
                diff=_diff(_pretty(_call_dict(want)), _pretty(_call_dict(got)), "recorded", "now"),
                message=f"call {i + 1} of the turn differs: recorded "
                f"{_call_text(want)}, now {_call_text(got)}",
            )
        )


class _Cursor:
    """Which recorded turn the loop is on, and its recorded results still to hand out."""

    def __init__(self) -> None:
        self.index = 0
        self.turn: Turn | None = None
        self._pending: dict[tuple[str, str], deque[ToolExecuted]] = {}
        self._lock = threading.Lock()

    def advance(self, recording: Recording) -> Turn:
        if self.index >= len(recording.turns):
            if recording.status is None:
                raise RecordingEnded("the recording ends here: the session never finished")
            raise Diverged(
                Divergence(
                    kind="turns",
                    step=self.index + 1,
                    expected=len(recording.turns),
                    actual=self.index + 1,
                    message=f"the loop asked for turn {self.index + 1}, but the recording "
                    f"ended after {len(recording.turns)} turns",
                )
            )
        self.turn = recording.turns[self.index]
        self.index += 1
        pending: dict[tuple[str, str], deque[ToolExecuted]] = defaultdict(deque)
        for call_id, name, raw in self.turn.calls:
            if call_id in self.turn.results:
                pending[(name, canonical_json(raw))].append(self.turn.results[call_id])
        self._pending = dict(pending)
        return self.turn

    def take(self, name: str, raw: dict[str, Any]) -> ToolExecuted:
        step = self.turn.event.turn if self.turn else 0
        with self._lock:
            queue = self._pending.get((name, canonical_json(raw)))
            if queue:
                return queue.popleft()
        raise Diverged(
            Divergence(
                kind="calls",
                step=step,
                tool=name,
                actual=raw,
                message=f"{name} was called with an input the recording has no result for",
            )
        )


class RecordedTools:
    """An executor answering each call with its recorded result instead of running it."""

    def __init__(self, cursor: _Cursor) -> None:
        self._cursor = cursor

    def __call__(
        self,
        ctx: ToolContext,
        name: str,
        raw: dict[str, Any],
        *,
        on_approval: ApprovalHook | None = None,
    ) -> ToolResult:
        recorded = self._cursor.take(name, raw)
        return ToolResult(
            ok=recorded.ok,
            output=recorded.output,
            data=recorded.data,
            error=recorded.error,
            argv=recorded.argv,
            exit_code=recorded.exit_code,
            bytes_cut=recorded.bytes_cut,
            duration_s=recorded.duration_s or 1e-9,
            reconnected=recorded.reconnected,
        )


class LiveTools:
    """An executor running each call for real and comparing today's output with the recording."""

    def __init__(self, cursor: _Cursor) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self.calls: list[CallDrift] = []
        self.outputs: dict[str, CallRecord] = {}
        self._order: dict[str, int] = {}

    def __call__(
        self,
        ctx: ToolContext,
        name: str,
        raw: dict[str, Any],
        *,
        on_approval: ApprovalHook | None = None,
    ) -> ToolResult:
        recorded = self._cursor.take(name, raw)
        if self._cursor.turn is not None:
            order = {cid: i for i, (cid, _, _) in enumerate(self._cursor.turn.calls)}
            self._order[recorded.call_id] = order.get(recorded.call_id, 0)
        result = execute(ctx, name, raw, on_approval=on_approval)
        output = redact(result.output)
        same = output == recorded.output and result.ok == recorded.ok
        drift = CallDrift(
            step=self._cursor.turn.event.turn if self._cursor.turn else 0,
            call_id=recorded.call_id,
            tool=name,
            host=recorded.host,
            same=same,
            recorded_ok=recorded.ok,
            ok=result.ok,
            diff="" if same else _diff(recorded.output, output, "recorded", "today"),
        )
        with self._lock:
            self.calls.append(drift)
            self.outputs[recorded.call_id] = CallRecord(
                recorded.call_id, name, raw, output, result.ok, drift.step
            )
        return result

    def report(self) -> list[CallDrift]:
        """Call by call, in the order the recording made them (they ran concurrently)."""
        return sorted(self.calls, key=lambda c: (c.step, self._order.get(c.call_id, 0)))


class MemoryWriter(TranscriptWriter):
    """Keeps a replay's events in memory. A replay is a check, not a new audit trail, and an
    fsync per event would cost more than the whole replay. In offline mode it stops the run at
    the first report_finding whose answer differs from the recorded one."""

    def __init__(self, path: Path, cursor: _Cursor, strict: bool) -> None:
        self.path = Path(f"replay of {path}")
        self.events: list[Event] = []
        self._cursor, self._strict = cursor, strict
        self._lock = threading.Lock()

    def append(self, event: Event) -> Event:
        with self._lock:
            self.events.append(event)
        if self._strict and isinstance(event, ToolExecuted) and event.tool == REPORT_FINDING:
            self._check_report(event)
        return event

    def close(self) -> None:
        return None

    def _check_report(self, event: ToolExecuted) -> None:
        turn = self._cursor.turn
        recorded = turn.results.get(event.call_id) if turn else None
        if turn is None or recorded is None:
            return
        if (recorded.ok, recorded.output) == (event.ok, event.output):
            return
        raise Diverged(
            Divergence(
                kind="report",
                step=turn.event.turn,
                call_id=event.call_id,
                tool=REPORT_FINDING,
                expected=recorded.output,
                actual=event.output,
                diff=_diff(recorded.output, event.output, "recorded", "replayed"),
                cause_call_id=_failed_call(event),
                message="report_finding got a different answer from the grounding check than "
                "it got when recorded",
            )
        )


def replay(
    path: Path | str,
    *,
    live_ctx: ToolContext | None = None,
    brain: Brain | None = None,
    settings: Settings | None = None,
) -> ReplayResult:
    """Replay the transcript at `path`.

    `live_ctx` runs the tools for real on its hosts (drift); without it the recorded results
    answer. `brain` re-drives a deterministic brain (a playbook) instead of the recorded
    turns, and its calls are checked against the recording.
    """
    path = Path(path)
    banner = not_verified(verify(path))
    if banner is not None:
        raise ReplayError(f"{path}: {banner} A replay of an edited transcript proves nothing.")
    recording = read_recording(path)
    cursor = _Cursor()
    live = LiveTools(cursor) if live_ctx is not None else None
    executor = live if live is not None else RecordedTools(cursor)
    writer = MemoryWriter(path, cursor, strict=live is None)
    driver: Brain = (
        ReplayBrain(recording, cursor) if brain is None else CheckedBrain(brain, recording, cursor)
    )
    inv = _investigation(recording, driver, live_ctx or ToolContext(hosts={}), writer, settings)
    inv.executor = executor
    divergence: Divergence | None = None
    status: SessionStatus
    try:
        run = inv.run()
        status, findings, totals = run.status, run.findings, run.totals
    except Diverged as stop:
        divergence = stop.divergence
        status, findings, totals = "error", inv.findings, inv.meter.snapshot()
    if divergence is None and live is None:
        divergence = _compare_end(recording, status, findings)
    return ReplayResult(
        transcript=str(path),
        mode="offline" if live is None else "live",
        status=status,
        recorded_status=recording.status,
        turns=totals.turns,
        recorded_turns=len(recording.turns),
        findings=findings,
        recorded_findings=recording.findings,
        divergence=divergence,
        calls=live.report() if live else [],
        finding_drift=_recheck(recording.findings, live.outputs) if live else [],
        prompt_drift=_prompt_drift(recording.start),
        wall_s=totals.wall_s,
    )


def _investigation(
    recording: Recording,
    brain: Brain,
    ctx: ToolContext,
    writer: TranscriptWriter,
    settings: Settings | None,
) -> Investigation:
    start = recording.start
    settings = settings or Settings()
    try:
        budget = Budget.model_validate(start.budget)
    except ValidationError:
        budget = settings.budget
    # The wall clock is the one budget a replay cannot reproduce; the recorded turns end it.
    budget.max_wall_s = float("inf")
    return Investigation(
        brain=brain,
        ctx=ctx,
        writer=writer,
        system="",
        tools=start.tools,
        messages=[opening_message(start.question, start.hosts)],
        budget=budget,
        question=start.question,
        hosts=start.hosts,
        price=price_for(start.model, settings.prices),
        totals=Totals(),
    )


def _compare_end(
    recording: Recording, status: SessionStatus, findings: list[Finding]
) -> Divergence | None:
    want = [f.model_dump(mode="json") for f in recording.findings]
    got = [f.model_dump(mode="json") for f in findings]
    if want != got:
        return Divergence(
            kind="findings",
            step=0,
            expected=want,
            actual=got,
            diff=_diff(_pretty(want), _pretty(got), "recorded", "replayed"),
            message=f"the replay produced {len(got)} findings where the recording has "
            f"{len(want)}, or they differ",
        )
    if recording.status is not None and status != recording.status:
        return Divergence(
            kind="status",
            step=0,
            expected=recording.status,
            actual=status,
            message=f"the replay ended {status!r}; the recording ended {recording.status!r}",
        )
    return None


def _recheck(findings: list[Finding], outputs: dict[str, CallRecord]) -> list[FindingDrift]:
    """Each recorded finding's quotes against today's outputs, with the loop's own check."""
    drift = []
    for finding in findings:
        checks = []
        for ev in finding.evidence:
            call = outputs.get(ev.call_id)
            # Today's output stands in for the recorded one, read in the turn after its call.
            turn = call.turn + 1 if call else 0
            held = ground_quote(ev.quote, call, claim=finding.claim, turn=turn).grounded
            checks.append(QuoteCheck(call_id=ev.call_id, quote=ev.quote, grounded=held))
        holds = bool(checks) and all(c.grounded for c in checks)
        drift.append(
            FindingDrift(
                claim=finding.claim, was_grounded=finding.grounded, holds=holds, quotes=checks
            )
        )
    return drift


def _prompt_drift(start: SessionStarted) -> list[PromptDrift]:
    """Today's system prompt and tool schemas against the hashes the recording started with
    (older transcripts carry none, and are not judged)."""
    today = {"system prompt": sha256_of(system_prompt()), "tool schemas": tools_hash(tool_specs())}
    recorded = {"system prompt": start.system_hash, "tool schemas": start.tools_hash}
    return [
        PromptDrift(part=part, recorded_hash=recorded[part], today_hash=today[part])
        for part in ("system prompt", "tool schemas")
        if recorded[part] and recorded[part] != today[part]
    ]


def _failed_call(event: ToolExecuted) -> str:
    """The call behind the first quote that failed the grounding check, from its verdicts."""
    data = event.data if isinstance(event.data, dict) else {}
    for raw in data.get("quotes", []):
        quote = QuoteGrounding.model_validate(raw)
        if not quote.grounded:
            return quote.call_id
    return ""


def _call_dict(call: tuple[str, str, dict[str, Any]] | None) -> dict[str, Any] | None:
    return None if call is None else {"id": call[0], "tool": call[1], "input": call[2]}


def _call_text(call: tuple[str, str, dict[str, Any]] | None) -> str:
    return "no call" if call is None else f"{call[1]} {call[0]} {json.dumps(call[2])}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _diff(before: str, after: str, a: str, b: str) -> str:
    """A unified diff, capped: enough to see what changed, not a second copy of the output."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), fromfile=a, tofile=b, lineterm="", n=2
        )
    )
    extra = len(lines) - DIFF_LINES
    text = "\n".join(lines[:DIFF_LINES])
    if len(text) > DIFF_CHARS:
        text = text[:DIFF_CHARS] + "..."
    return text + (f"\n[diff cut: {extra} more lines]" if extra > 0 else "")
