"""What a replay found: the first divergence, the drift of calls and findings, the verdict.

```python
diff = capped_diff(recorded.output, today, "recorded", "today")
drift = recheck_findings(recording.findings, outputs_today)   # each quote against today
```

Every replay (an investigation's, an MCP session's) reports through these models and
compares through these functions, so `sleuth replay` shows them all the same way.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.findings import REPORT_FINDING, CallRecord, check_evidence
from sleuth.agent.session import sha256_of, tool_specs, tools_hash
from sleuth.transcripts.events import (
    Evidence,
    EvidenceCheck,
    Finding,
    Refusal,
    SessionStarted,
    SessionStatus,
    ToolExecuted,
)
from sleuth.transcripts.fleet import part_id
from sleuth.transcripts.hostlist import expand
from sleuth.transcripts.recording import Recording

DIFF_LINES = 40
DIFF_CHARS = 4000

DivergenceKind = Literal["calls", "conversation", "report", "findings", "turns", "status"]
Call = tuple[str, str, dict[str, Any]]
"""A tool call as (id, tool, input)."""


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


class FindingDrift(BaseModel):
    """A recorded finding's evidence, checked again against today's outputs."""

    claim: str
    was_grounded: bool
    holds: bool
    quotes: list[EvidenceCheck]
    """Each piece's verdict today, with the rule it fails now (the loop's own reasons)."""


class PromptDrift(BaseModel):
    part: Literal["system prompt", "tool schemas"]
    recorded_hash: str
    today_hash: str


class ReplayResult(BaseModel):
    transcript: str
    verdict: str = ""
    """The transcript's verdict, as `sleuth verify` gives it (signed, signed_prefix,
    integrity_only; a failed one is not replayed)."""
    headline: str = ""
    """That verdict in verify's words, said before the replay's own result."""
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


class Diverged(Exception):
    """Raised inside the loop to stop it at the first difference; not a loop Stop, so it escapes."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.describe())
        self.divergence = divergence


def check_calls(step: int, expected: list[Call], actual: list[Call]) -> None:
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
                diff=capped_diff(
                    _pretty(_call_dict(want)), _pretty(_call_dict(got)), "recorded", "now"
                ),
                message=f"call {i + 1} of the turn differs: recorded "
                f"{_call_text(want)}, now {_call_text(got)}",
            )
        )


def report_changed(
    step: int, call_id: str, recorded: str, replayed: str, cause_call_id: str = ""
) -> Divergence:
    """report_finding's answer from the grounding check is not the one it got when recorded."""
    return Divergence(
        kind="report",
        step=step,
        call_id=call_id,
        tool=REPORT_FINDING,
        expected=recorded,
        actual=replayed,
        diff=capped_diff(recorded, replayed, "recorded", "replayed"),
        cause_call_id=cause_call_id,
        message="report_finding got a different answer from the grounding check than "
        "it got when recorded",
    )


def ending_divergence(
    recording: Recording, status: SessionStatus, findings: list[Finding]
) -> Divergence | None:
    """How an offline replay's end differs from the recorded end: findings first, then status."""
    want = [f.model_dump(mode="json") for f in recording.findings]
    got = [f.model_dump(mode="json") for f in findings]
    if want != got:
        return Divergence(
            kind="findings",
            step=0,
            expected=want,
            actual=got,
            diff=capped_diff(_pretty(want), _pretty(got), "recorded", "replayed"),
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


def recheck_findings(findings: list[Finding], outputs: dict[str, CallRecord]) -> list[FindingDrift]:
    """Each recorded finding's evidence against today's outputs, with the loop's own check; a
    reference holds only while today's lines read as the recorded ones."""
    drift = []
    for finding in findings:
        checks = [
            _recheck_hosts(ev, outputs, finding.claim)
            if ev.hosts
            else _recheck(ev, outputs.get(ev.call_id), finding.claim)
            for ev in finding.evidence
        ]
        holds = bool(checks) and all(c.grounded for c in checks)
        drift.append(
            FindingDrift(
                claim=finding.claim, was_grounded=finding.grounded, holds=holds, quotes=checks
            )
        )
    return drift


def _recheck(ev: Evidence, call: CallRecord | None, claim: str) -> EvidenceCheck:
    # Today's output stands in for the recorded one, read in the turn after its call.
    check = check_evidence(ev, call, claim=claim, turn=call.turn + 1 if call else 0)
    check = check.model_copy(update={"call_id": ev.call_id})
    if check.grounded and ev.lines and ev.text is not None and check.text != ev.text:
        return check.model_copy(
            update={
                "grounded": False,
                "failure": Refusal.LINES_CHANGED,
                "why": f"lines {ev.lines} of call {ev.call_id} read differently today",
            }
        )
    return check


def _recheck_hosts(ev: Evidence, outputs: dict[str, CallRecord], claim: str) -> EvidenceCheck:
    """Evidence of a fleet call: each host it names must hold it in its own output today."""
    try:
        hosts = expand(ev.hosts)
    except ValueError:
        hosts = []
    checks = [_recheck(ev, outputs.get(part_id(ev.call_id, host)), claim) for host in hosts]
    refused = next((c for c in checks if not c.grounded), None)
    if refused is not None or not checks:
        return refused or EvidenceCheck(
            call_id=ev.call_id, grounded=False, failure=Refusal.UNKNOWN_HOST, hosts=ev.hosts
        )
    return checks[-1]


def prompt_drift(start: SessionStarted) -> list[PromptDrift]:
    """Today's system prompt and tool schemas against the hashes the recording started with
    (older transcripts carry none, and are not judged)."""
    today = {"system prompt": sha256_of(system_prompt()), "tool schemas": tools_hash(tool_specs())}
    recorded = {"system prompt": start.system_hash, "tool schemas": start.tools_hash}
    return [
        PromptDrift(part=part, recorded_hash=recorded[part], today_hash=today[part])
        for part in ("system prompt", "tool schemas")
        if recorded[part] and recorded[part] != today[part]
    ]


def first_ungrounded_call(event: ToolExecuted) -> str:
    """The call behind the first quote that failed a report's grounding check, from its
    verdicts."""
    data = event.result.data if isinstance(event.result.data, dict) else {}
    for raw in data.get("quotes", []):
        quote = EvidenceCheck.model_validate(raw)
        if not quote.grounded:
            return quote.call_id
    return ""


def capped_diff(before: str, after: str, a: str, b: str) -> str:
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


def _call_dict(call: Call | None) -> dict[str, Any] | None:
    return None if call is None else {"id": call[0], "tool": call[1], "input": call[2]}


def _call_text(call: Call | None) -> str:
    return "no call" if call is None else f"{call[1]} {call[0]} {json.dumps(call[2])}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
