"""The `report_finding` tool and the grounding check.

A finding's evidence quotes tool output by call id. Each quote must occur,
whitespace-normalised, in the recorded output of the call it names. A finding
with a failed quote is held back and the model is told exactly which quote
failed against which call; its next report (naming the held one in `mends`, or
repeating its claim) is kept either way, marked ungrounded if a quote still fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.transcripts.events import Evidence, Finding, ToolSpec, Verdict

REPORT_FINDING = "report_finding"
# read_lines numbers its lines ("    12\tcode"); a quote of several lines may leave them out.
_LINE_NUMBER = re.compile(r"^ *\d+\t", re.M)


class EvidenceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str = Field(description="The id of the tool call whose output holds the quote.")
    quote: str = Field(
        min_length=1,
        description="Text copied exactly from that call's output (a line or a few lines).",
    )


class ReportFindingInput(BaseModel):
    """Report one claim that answers (part of) the question, with the evidence it rests on."""

    model_config = ConfigDict(extra="forbid")
    claim: str = Field(min_length=1, description="One sentence: what is true, plainly stated.")
    verdict: Verdict = Field(description="yes, no, partial, or unknown when the evidence is short.")
    confidence: float = Field(
        ge=0.0, le=1.0, description="0 to 1: how sure the evidence makes you."
    )
    evidence: list[EvidenceInput] = Field(
        min_length=1, description="Quotes from earlier tool outputs, each naming its call id."
    )
    next_steps: list[str] = Field(
        default_factory=list, description="What a person could check next, if anything."
    )
    mends: str | None = Field(
        None, description="When correcting a finding that failed the grounding check: its call id."
    )


def report_finding_spec() -> ToolSpec:
    schema = ReportFindingInput.model_json_schema()
    schema.pop("title", None)
    return ToolSpec(
        name=REPORT_FINDING,
        description=(
            "Record one finding: a claim, a verdict, a confidence and the evidence for it. Each "
            "evidence item names the id of an earlier tool call and quotes that call's output "
            "exactly; quotes are checked against the recorded output. Call it once per claim."
        ),
        input_schema=schema,
    )


def normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Outcome:
    """What one report_finding call produced."""

    finding: Finding | None
    """The finding to keep, or None while it waits for its one mend."""
    feedback: str
    """The tool_result text the model gets back."""
    is_error: bool


class Grounder:
    """Remembers every tool output by call id and checks findings against them."""

    def __init__(self) -> None:
        self.outputs: dict[str, tuple[str, list[str]]] = {}
        self._held: dict[str, Finding] = {}

    def record(self, call_id: str, tool: str, output: str) -> None:
        forms = [normalise(output), normalise(_LINE_NUMBER.sub("", output))]
        self.outputs[call_id] = (tool, forms)

    def report(self, call_id: str, raw: dict[str, object]) -> Outcome:
        try:
            args = ReportFindingInput.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg']}" for e in exc.errors()
            )
            return Outcome(None, f"invalid report_finding: {problems}. Nothing was recorded.", True)
        evidence = [self._check(e) for e in args.evidence]
        finding = Finding(
            claim=args.claim,
            verdict=args.verdict,
            confidence=args.confidence,
            evidence=[ev for ev, _ in evidence],
            next_steps=args.next_steps,
            grounded=all(ev.grounded for ev, _ in evidence),
        )
        held = self._take_held(args.mends, args.claim)
        if finding.grounded:
            return Outcome(finding, "Recorded; every quote was found in its call's output.", False)
        problems = "\n".join(f"- {why}" for _, why in evidence if why)
        if held is not None:
            return Outcome(
                finding,
                "Recorded, marked UNGROUNDED: these quotes still do not match:\n" + problems,
                True,
            )
        self._held[call_id] = finding
        return Outcome(
            None,
            "Not recorded yet: the grounding check failed.\n" + problems + "\nCall "
            f"report_finding again with mends={call_id!r} and quotes copied exactly from the "
            "outputs they name. This is the one chance to mend it; after that it is kept and "
            "marked ungrounded.",
            True,
        )

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

    def _check(self, item: EvidenceInput) -> tuple[Evidence, str]:
        recorded = self.outputs.get(item.call_id)
        if recorded is None:
            known = ", ".join(self.outputs) or "(none yet)"
            why = f"call id {item.call_id!r} is not a tool call of this session; known: {known}"
            return Evidence(call_id=item.call_id, quote=item.quote, grounded=False), why
        tool, forms = recorded
        quote = normalise(item.quote)
        if quote and any(quote in form for form in forms):
            return Evidence(call_id=item.call_id, quote=item.quote, grounded=True), ""
        why = f"quote {item.quote!r} does not occur in the output of call {item.call_id} ({tool})"
        return Evidence(call_id=item.call_id, quote=item.quote, grounded=False), why


def summarise(findings: list[Finding]) -> str:
    """The final answer in plain text: one line per finding, ungrounded ones flagged."""
    if not findings:
        return "No findings were reported."
    lines = []
    for i, f in enumerate(findings, 1):
        flag = "" if f.grounded else " [UNGROUNDED]"
        lines.append(f"{i}. [{f.verdict}, {f.confidence:.0%}]{flag} {f.claim}")
    return "\n".join(lines)
