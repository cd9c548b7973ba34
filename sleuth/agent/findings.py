"""The `report_finding` tool and the grounding check.

A finding's evidence names an earlier call by id and either quotes its output or cites its
lines by the numbers the model was shown (`{"call_id": "toolu_1", "lines": "12-14"}`; see
`evidence.lines`). `check_evidence` decides whether one piece grounds its claim; the loop,
the MCP face and replay all call it. Every piece must come from a call of an earlier turn,
and from a call that succeeded unless the claim is about that failure. A quote must be
meaningful and occur in the output beyond an echo of the call's arguments, as models write
quotes (`evidence.quotes`: whitespace-blind, `...` for gaps, trimmed when cut inside a word).
A reference is grounded by construction when the lines were shown: Sleuth copies them from
the recorded output into the evidence. A finding with refused evidence is held back and the
model is told which rule each piece failed, and where; its next report (naming the held one
in `mends`, or repeating its claim) is kept either way, marked ungrounded if still refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sleuth.agent.evidence import lines as shown_lines
from sleuth.agent.evidence.flat import normalise
from sleuth.agent.evidence.quotes import (
    BARE_NUMBER,
    MIN_CHARS,
    MIN_TOKENS,
    Output,
    find_number,
    find_quote,
)
from sleuth.agent.evidence.why import refused_lines, refused_quote
from sleuth.errors import ErrorKind
from sleuth.transcripts.events import Evidence, EvidenceCheck, Finding, Refusal, ToolSpec, Verdict
from sleuth.transcripts.recording import REPORT_FINDING as REPORT_FINDING

_FAILURE_WORDS = re.compile(
    r"\b(error|errors|fail|fails|failed|failure|cannot|can't|unable|denied|refused|not found|"
    r"no such|missing|absent|does not exist|not exist|unreachable|timed out|timeout|"
    r"not allowed|not approved|rejected|invalid)\b",
    re.I,
)
"""A claim about a failed call says that it failed; only such a claim may quote its error."""


QUOTE_RULE = (
    "Text copied from that call's output: a line, a few lines, or at least "
    f"{MIN_TOKENS} words and {MIN_CHARS} characters of one; `...` may mark a part left out."
)


class QuoteInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str = Field(description="The id of the tool call whose output holds the quote.")
    quote: str = Field(min_length=1, description=QUOTE_RULE)


class EvidenceInput(BaseModel):
    """A quote of a call's output, or the numbers of the lines it showed."""

    model_config = ConfigDict(extra="forbid")
    call_id: str = Field(description="The id of the tool call whose output holds the evidence.")
    quote: str = Field("", description=QUOTE_RULE + " Give a quote or lines, not both.")
    lines: str = Field(
        "",
        description="Instead of a quote: the numbers shown at the left of that output's lines, "
        '"12" or "12-14"; Sleuth copies those lines in.',
    )

    @field_validator("lines", mode="before")
    @classmethod
    def _span(cls, raw: object) -> str:
        return "" if raw in ("", None) else shown_lines.span_text(raw)

    @model_validator(mode="after")
    def _one_of(self) -> EvidenceInput:
        if bool(self.quote) == bool(self.lines):
            raise ValueError("give either a quote or lines, not both and not neither")
        return self


E = TypeVar("E", QuoteInput, EvidenceInput)


class FindingInput(BaseModel, Generic[E]):
    """Report one claim that answers (part of) the question, with the evidence it rests on."""

    model_config = ConfigDict(extra="forbid")
    claim: str = Field(min_length=1, description="One sentence: what is true, plainly stated.")
    verdict: Verdict = Field(description="yes, no, partial, or unknown when the evidence is short.")
    confidence: float = Field(
        ge=0.0, le=1.0, description="0 to 1: how sure the evidence makes you."
    )
    evidence: list[E] = Field(
        min_length=1,
        description="Quotes from (or lines of) earlier tool outputs, each naming its call id.",
    )
    next_steps: list[str] = Field(
        default_factory=list, description="What a person could check next, if anything."
    )
    mends: str | None = Field(
        None, description="When correcting a finding that failed the grounding check: its call id."
    )


ReportFindingInput = FindingInput[EvidenceInput]
QuotesOnlyInput = FindingInput[QuoteInput]
"""report_finding without references, for measuring what references change."""


def report_finding_spec(references: bool = True) -> ToolSpec:
    model = ReportFindingInput if references else QuotesOnlyInput
    schema = model.model_json_schema()
    schema.pop("title", None)
    cite = (
        "either quotes that call's output or cites its lines by the numbers shown at their "
        'left ({"call_id": "toolu_01", "lines": "12-14"})'
        if references
        else "quotes that call's output"
    )
    return ToolSpec(
        name=REPORT_FINDING,
        description=(
            "Record one finding (a claim, a verdict, a confidence) and its evidence: each "
            f"evidence item names the id of an earlier tool call and {cite}. Evidence is "
            "checked against the recorded outputs. Call it once per claim."
        ),
        input_schema=schema,
    )


@dataclass(frozen=True)
class CallRecord:
    """One tool call as the grounding check knows it: what was asked, what came back, when."""

    call_id: str
    tool: str
    input: dict[str, Any]
    output: str
    ok: bool
    turn: int
    """The model turn that made the call; its output is visible from turn + 1 on."""


def check_evidence(
    evidence: Evidence | EvidenceInput | QuoteInput,
    call: CallRecord | None,
    *,
    claim: str,
    turn: int,
) -> EvidenceCheck:
    """One piece of evidence for `claim`, written in model turn `turn`: a quote or a reference."""
    spec = "" if isinstance(evidence, QuoteInput) else evidence.lines
    if spec:
        return ground_lines(spec, call, claim=claim, turn=turn)
    return ground_quote(evidence.quote, call, claim=claim, turn=turn)


def ground_quote(quote: str, call: CallRecord | None, *, claim: str, turn: int) -> EvidenceCheck:
    """Does `quote`, from the output of `call`, ground `claim` written in model turn `turn`?

        verdict = ground_quote('"num_nextn_predict_layers": 1', call, claim="MTP", turn=2)

    Grounded only if the call is known, ran in an earlier turn, and succeeded (or the claim is
    about its failure); the quote is meaningful (MIN_TOKENS words and MIN_CHARS characters, a
    whole line, a whole `key: value`, or a bare number on a line that also names a word of the
    claim); and it occurs in the output at word edges (whitespace-blind, `...` for gaps, cut
    words trimmed from a long quote) and not merely as an echo of the call's own arguments.
    """
    refused = _refused_call(call, claim, turn)
    if refused is not None:
        return refused.model_copy(update={"quote": quote})
    assert call is not None
    text = normalise(shown_lines.strip_gutter(quote))
    output = Output.of(call.tool, call.output, call.input)
    if BARE_NUMBER.fullmatch(text):
        found = find_number(text, claim, output)
    else:
        found = find_quote(text, output)
    if found.failure is None:
        return EvidenceCheck(call_id=call.call_id, quote=quote, text=found.text, grounded=True)
    line = output.shown(found.line)
    return EvidenceCheck(
        call_id=call.call_id,
        quote=quote,
        grounded=False,
        failure=found.failure,
        line=line,
        why=refused_quote(found, quote, text, _where(call), line),
    )


def ground_lines(spec: str, call: CallRecord | None, *, claim: str, turn: int) -> EvidenceCheck:
    """Does the reference to lines `spec` ("12-14") of `call`'s output ground `claim`? Yes when
    the call may be cited (as for a quote) and the output showed every one of those lines,
    not all blank, at most MAX_LINES of them; the lines are copied into the check's `text`."""
    refused = _refused_call(call, claim, turn)
    if refused is not None:
        return refused.model_copy(update={"lines": spec})
    assert call is not None
    first, last = shown_lines.span(spec)
    cited = shown_lines.cite(call.tool, call.output, first, last)
    failure: Refusal | None = None
    if last - first + 1 > shown_lines.MAX_LINES:
        failure = Refusal.TOO_MANY_LINES
    elif cited is None:
        failure = Refusal.LINES_OUT_OF_RANGE
    elif not any(shown_lines.bare_line(line).strip() for line in cited):
        failure = Refusal.TOO_SHORT
    if failure is not None:
        shown = shown_lines.shown_range(call.tool, call.output)
        return EvidenceCheck(
            call_id=call.call_id,
            lines=spec,
            grounded=False,
            failure=failure,
            why=refused_lines(failure, spec, _where(call), shown),
        )
    assert cited is not None
    return EvidenceCheck(call_id=call.call_id, lines=spec, text="\n".join(cited), grounded=True)


def _refused_call(call: CallRecord | None, claim: str, turn: int) -> EvidenceCheck | None:
    """The rules every piece of evidence meets whatever its form: a known call, seen in an
    earlier turn, that succeeded unless the claim is about its failure."""
    if call is None:
        why = "the call this evidence names is not a tool call of this session"
        return EvidenceCheck(call_id="", grounded=False, failure=Refusal.UNKNOWN_CALL, why=why)
    if call.turn >= turn:
        why = (
            f"call {call.call_id} ran in this same turn: its output was not visible when you "
            "wrote this finding. Read it, then report in a later turn"
        )
        return EvidenceCheck(
            call_id=call.call_id, grounded=False, failure=Refusal.SAME_TURN, why=why
        )
    if not call.ok and not _FAILURE_WORDS.search(claim):
        why = (
            f"call {call.call_id} ({call.tool}) failed; its output grounds only a claim that "
            "says so"
        )
        return EvidenceCheck(
            call_id=call.call_id, grounded=False, failure=Refusal.ERROR_RESULT, why=why
        )
    return None


def _where(call: CallRecord) -> str:
    return f"the output of call {call.call_id} ({call.tool})"


@dataclass
class Outcome:
    """What one report_finding call produced."""

    finding: Finding | None
    """The finding to keep, or None while it waits for its one mend."""
    feedback: str
    """The tool_result text the model gets back."""
    is_error: bool
    quotes: list[EvidenceCheck]
    """Each piece of evidence's verdict, as data: replay names the call behind a changed
    answer from it."""
    kind: ErrorKind | None = None
    """invalid_input: the call's arguments do not validate; failed: some evidence was refused."""


class Grounder:
    """Remembers every tool call by id and checks findings against them. `references`: the
    model may cite lines as well as quote (off only to measure what references change)."""

    def __init__(self, references: bool = True) -> None:
        self.calls: dict[str, CallRecord] = {}
        self.references = references
        self._held: dict[str, Finding] = {}

    def record(self, call: CallRecord) -> None:
        self.calls[call.call_id] = call

    def report(self, call_id: str, raw: dict[str, object], turn: int) -> Outcome:
        model = ReportFindingInput if self.references else QuotesOnlyInput
        try:
            args = model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg']}" for e in exc.errors()
            )
            return Outcome(
                None,
                f"invalid report_finding: {problems}. Nothing was recorded.",
                True,
                [],
                ErrorKind.INVALID_INPUT,
            )
        checks = [self.check(e, args.claim, turn) for e in args.evidence]
        finding = Finding(
            claim=args.claim,
            verdict=args.verdict,
            confidence=args.confidence,
            evidence=[Evidence.model_validate(c.model_dump(exclude={"why"})) for c in checks],
            next_steps=args.next_steps,
            grounded=all(c.grounded for c in checks),
        )
        held = self._take_held(args.mends, args.claim)
        if finding.grounded:
            return Outcome(finding, _recorded(checks), False, checks)
        problems = "\n".join(f"- {c.failure}: {c.why}" for c in checks if not c.grounded)
        if held is not None:
            return Outcome(
                finding,
                "Recorded, marked UNGROUNDED: this evidence still does not ground it:\n" + problems,
                True,
                checks,
                ErrorKind.FAILED,
            )
        self._held[call_id] = finding
        return Outcome(
            None,
            "Not recorded yet: the grounding check failed.\n" + problems + "\nCall "
            f"report_finding again with mends={call_id!r} and evidence that passes: quotes "
            "copied from the outputs they name, or the lines they are on. This is the one "
            "chance to mend it; after that it is kept and marked ungrounded.",
            True,
            checks,
            ErrorKind.FAILED,
        )

    def check(
        self, evidence: EvidenceInput | QuoteInput | Evidence, claim: str, turn: int
    ) -> EvidenceCheck:
        call = self.calls.get(evidence.call_id)
        verdict = check_evidence(evidence, call, claim=claim, turn=turn)
        if call is None:
            known = ", ".join(self.calls) or "(none yet)"
            why = f"call id {evidence.call_id!r} is not a tool call of this session; known: {known}"
            return verdict.model_copy(update={"call_id": evidence.call_id, "why": why})
        return verdict

    def unmended(self) -> list[tuple[str, Finding]]:
        """Held findings the model never mended; they are kept, ungrounded."""
        left = list(self._held.items())
        self._held.clear()
        return left

    def _take_held(self, mends: str | None, claim: str) -> Finding | None:
        if mends in self._held:
            return self._held.pop(mends)
        for key, held in self._held.items():
            if normalise(held.claim) == normalise(claim):
                return self._held.pop(key)
        return None


def _recorded(checks: list[EvidenceCheck]) -> str:
    """The answer to a grounded finding; what Sleuth filled in or trimmed is shown back, so the
    model sees the text its evidence stands on."""
    notes = [
        f"- call {c.call_id} lines {c.lines}: {_clip(c.text or '')!r}"
        if c.lines
        else f"- quote {_clip(c.quote)!r} was cut inside a word; grounded on "
        f"{_clip(c.text or '')!r}"
        for c in checks
        if c.text is not None
    ]
    if not notes:
        return "Recorded; every quote was found in its call's output."
    return "Recorded; all its evidence grounded on:\n" + "\n".join(notes)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarise(findings: list[Finding]) -> str:
    """The final answer in plain text: one line per finding, ungrounded ones flagged."""
    if not findings:
        return "No findings were reported."
    lines = []
    for i, f in enumerate(findings, 1):
        flag = "" if f.grounded else " [UNGROUNDED]"
        lines.append(f"{i}. [{f.verdict}, {f.confidence:.0%}]{flag} {f.claim}")
    return "\n".join(lines)
