"""The `report_finding` tool and the grounding check.

A finding's evidence quotes tool output by call id. `ground_quote` decides
whether one quote grounds its claim: it must be meaningful, occur
(whitespace-normalised) in the output of the call it names beyond an echo of
that call's arguments, come from an earlier turn than the finding, and come
from a call that succeeded unless the claim is about that failure. A finding
with a failed quote is held back and the model is told exactly which quote
failed against which call; its next report (naming the held one in `mends`, or
repeating its claim) is kept either way, marked ungrounded if a quote still fails.

A quote from a fleet call (`host="@GROUP"`) may name `hosts`: it is then checked against each
named host's own output (as recorded, or with that host's own details masked, as the grouped
result shows it), not against the grouped result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.errors import ErrorKind
from sleuth.transcripts.events import Evidence, Finding, ToolSpec, Verdict
from sleuth.transcripts.fleet import part_id
from sleuth.transcripts.hostlist import expand
from sleuth.transcripts.recording import REPORT_FINDING as REPORT_FINDING

# read_lines numbers its lines ("    12\tcode"); a quote of several lines may leave them out.
_LINE_NUMBER = re.compile(r"^ *\d+\t", re.M)


class EvidenceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str = Field(description="The id of the tool call whose output holds the quote.")
    quote: str = Field(
        min_length=1,
        description="Text copied exactly from that call's output (a line or a few lines).",
    )
    hosts: list[str] = Field(
        default_factory=list,
        description="Only for a call on a host group (host='@NAME'): the hosts whose own output "
        "holds the quote, as names or ranges like gpu-[01-06,08]; it is checked against each.",
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


GroundingFailure = Literal[
    "unknown_call",
    "same_turn",
    "too_short",
    "not_found",
    "echo",
    "error_result",
    "bare_number",
    "unknown_host",
]
"""Why a quote did not ground its claim; replay and the loop branch on this, never on text."""

MIN_TOKENS = 2
MIN_CHARS = 8
"""A quote shorter than this (tokens, non-space characters) grounds only as a whole line or a
whole `key: value` of the output: a short fragment occurs almost anywhere."""
_BARE_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?%?")
_KEY_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{2,}")
_SEGMENT_SPLIT = re.compile(r"[,;{}\[\]]")
_FAILURE_WORDS = re.compile(
    r"\b(error|errors|fail|fails|failed|failure|cannot|can't|unable|denied|refused|not found|"
    r"no such|missing|absent|does not exist|not exist|unreachable|timed out|timeout|"
    r"not allowed|not approved|rejected|invalid)\b",
    re.I,
)
"""A claim about a failed call says that it failed; only such a claim may quote its error."""


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
    mask: Callable[[str], str] | None = None
    """One host's part of a fleet call: how its host's own details are masked, as the grouped
    result shows them; a quote may come from the output or its masked form (made when a quote
    is checked, so the output is held once)."""
    fleet_call: str = ""
    """One host's part of a fleet call: the fleet call's id."""


class QuoteGrounding(BaseModel):
    """The verdict on one quote: grounded, or the kind of failure and a sentence for the model."""

    call_id: str
    quote: str
    grounded: bool
    failure: GroundingFailure | None = None
    why: str = ""


def ground_quote(quote: str, call: CallRecord | None, *, claim: str, turn: int) -> QuoteGrounding:
    """Does `quote`, from the output of `call`, ground `claim` written in model turn `turn`?

        verdict = ground_quote('"num_nextn_predict_layers": 1', call, claim="MTP", turn=2)

    Grounded only if the call is known and ran in an earlier turn; the quote is meaningful
    (MIN_TOKENS tokens and MIN_CHARS characters, a whole line, a whole `key: value`, or a bare
    number on a line that also names a word of the claim); it occurs in the output at word
    boundaries and not merely as an echo of the call's own argument values; and the call
    succeeded, or the claim is about its failure. The loop and replay both call this.
    """
    call_id = call.call_id if call else ""

    def no(failure: GroundingFailure, why: str) -> QuoteGrounding:
        return QuoteGrounding(
            call_id=call_id, quote=quote, grounded=False, failure=failure, why=why
        )

    if call is None:
        return no("unknown_call", "the call this quote names is not a tool call of this session")
    where = f"the output of call {call.call_id} ({call.tool})"
    if call.turn >= turn:
        return no(
            "same_turn",
            f"call {call.call_id} ran in this same turn: its output was not visible when you "
            "wrote this finding. Read it, then report in a later turn",
        )
    text = normalise(quote)
    outputs = [call.output, call.mask(call.output)] if call.mask else [call.output]
    lines = [line for output in outputs for line in _output_lines(output)]
    if not call.ok and not _FAILURE_WORDS.search(claim):
        return no(
            "error_result",
            f"call {call.call_id} ({call.tool}) failed; its output grounds only a claim that "
            "says so",
        )
    echoes = _argument_values(call.input)
    if _BARE_NUMBER.fullmatch(text):
        keys = {w.lower() for w in _KEY_WORD.findall(claim)}
        for line in lines:
            named = keys & {w.lower() for w in _KEY_WORD.findall(line)}
            if named and _occurs_outside(text, line, echoes):
                return QuoteGrounding(call_id=call_id, quote=quote, grounded=True)
        return no(
            "bare_number",
            f"the number {quote!r} must be quoted together with its key (e.g. `name: {text}`, "
            f"across lines if the output puts them apart), or occur as a whole number on a "
            f"line of {where} that names the thing the claim is about",
        )
    if not _meaningful(text, lines):
        return no(
            "too_short",
            f"{quote!r} is too short to ground anything (at least {MIN_TOKENS} words and "
            f"{MIN_CHARS} characters, or a whole line, or a whole `key: value`)",
        )
    if any(text in value for value in echoes):
        return no(
            "echo",
            f"{quote!r} is (part of) an argument of call {call.call_id}: it shows what was "
            "asked, not what was found; quote the whole output line it is on",
        )
    forms = [f(out) for out in outputs for f in (normalise, _without_line_numbers)]
    if not any(_occurs(text, form) for form in forms):
        return no("not_found", f"quote {quote!r} does not occur in {where}")
    if not any(_occurs_outside(text, form, echoes) for form in forms):
        return no(
            "echo",
            f"{quote!r} occurs in {where} only as an echo of the call's own arguments",
        )
    return QuoteGrounding(call_id=call_id, quote=quote, grounded=True)


def _without_line_numbers(output: str) -> str:
    return normalise(_LINE_NUMBER.sub("", output))


def _output_lines(output: str) -> list[str]:
    return [normalise(line) for line in _LINE_NUMBER.sub("", output).splitlines() if line.strip()]


def _meaningful(text: str, lines: list[str]) -> bool:
    """Long enough to be specific, or a whole unit of the output: a line, a `key: value`, or a
    whole quoted JSON value (`LlamaForCausalLM` from `["LlamaForCausalLM"]`)."""
    if len(text.split()) >= MIN_TOKENS and len(text.replace(" ", "")) >= MIN_CHARS:
        return True
    bare = text.rstrip(",")
    if not any(ch.isalnum() for ch in bare):
        return False
    for line in lines:
        if bare == line.rstrip(","):
            return True
        for unit in (normalise(s) for s in _SEGMENT_SPLIT.split(line)):
            if bare == unit and (":" in unit or "=" in unit):
                return True
            if len(unit) > 2 and unit[0] == unit[-1] == '"' and bare == unit[1:-1]:
                return True
    return False


def _argument_values(raw: Any) -> list[str]:
    """Every string the model put into the call's input, normalised; short ones are too common
    in ordinary output to count as an echo."""
    if isinstance(raw, str):
        text = normalise(raw)
        return [text] if len(text) >= 3 else []
    if isinstance(raw, dict):
        return [v for value in raw.values() for v in _argument_values(value)]
    if isinstance(raw, list):
        return [v for value in raw for v in _argument_values(value)]
    return []


def _starts(text: str, quote: str) -> list[int]:
    found, at = [], text.find(quote)
    while at >= 0:
        before = text[at - 1] if at > 0 else " "
        end = at + len(quote)
        after = text[end] if end < len(text) else " "
        # A number or word must match whole: "3" is not in "30", "layers" is not in "nlayers".
        if not (quote[0].isalnum() and before.isalnum()) and not (
            quote[-1].isalnum() and after.isalnum()
        ):
            found.append(at)
        at = text.find(quote, at + 1)
    return found


def _occurs(quote: str, text: str) -> bool:
    return bool(quote) and bool(_starts(text, quote))


def _occurs_outside(quote: str, text: str, echoes: list[str]) -> bool:
    """An occurrence that shows something besides the echoed arguments: what is left of it,
    the echoes cut out, still holds a letter or digit."""
    covered = [False] * len(text)
    for value in echoes:
        at = text.find(value)
        while at >= 0:
            covered[at : at + len(value)] = [True] * len(value)
            at = text.find(value, at + 1)
    for at in _starts(text, quote):
        rest = (ch for i, ch in enumerate(text[at : at + len(quote)], at) if not covered[i])
        if any(ch.isalnum() for ch in rest):
            return True
    return False


@dataclass
class Outcome:
    """What one report_finding call produced."""

    finding: Finding | None
    """The finding to keep, or None while it waits for its one mend."""
    feedback: str
    """The tool_result text the model gets back."""
    is_error: bool
    quotes: list[QuoteGrounding]
    """Each quote's verdict, as data: replay names the call behind a changed answer from it."""
    kind: ErrorKind | None = None
    """invalid_input: the call's arguments do not validate; failed: a quote did not ground."""


class Grounder:
    """Remembers every tool call by id and checks findings against them."""

    def __init__(self) -> None:
        self.calls: dict[str, CallRecord] = {}
        self._held: dict[str, Finding] = {}

    def record(self, call: CallRecord) -> None:
        self.calls[call.call_id] = call

    def report(self, call_id: str, raw: dict[str, object], turn: int) -> Outcome:
        try:
            args = ReportFindingInput.model_validate(raw)
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
        quotes = [self.check(e.call_id, e.quote, args.claim, turn, e.hosts) for e in args.evidence]
        finding = Finding(
            claim=args.claim,
            verdict=args.verdict,
            confidence=args.confidence,
            evidence=[
                Evidence(call_id=e.call_id, quote=e.quote, grounded=q.grounded, hosts=e.hosts)
                for e, q in zip(args.evidence, quotes, strict=True)
            ],
            next_steps=args.next_steps,
            grounded=all(q.grounded for q in quotes),
        )
        held = self._take_held(args.mends, args.claim)
        if finding.grounded:
            return Outcome(
                finding, "Recorded; every quote was found in its call's output.", False, quotes
            )
        problems = "\n".join(f"- {q.why}" for q in quotes if not q.grounded)
        if held is not None:
            return Outcome(
                finding,
                "Recorded, marked UNGROUNDED: these quotes still do not ground it:\n" + problems,
                True,
                quotes,
                ErrorKind.FAILED,
            )
        self._held[call_id] = finding
        return Outcome(
            None,
            "Not recorded yet: the grounding check failed.\n" + problems + "\nCall "
            f"report_finding again with mends={call_id!r} and quotes copied exactly from the "
            "outputs they name. This is the one chance to mend it; after that it is kept and "
            "marked ungrounded.",
            True,
            quotes,
            ErrorKind.FAILED,
        )

    def check(
        self, call_id: str, quote: str, claim: str, turn: int, hosts: list[str] | None = None
    ) -> QuoteGrounding:
        if hosts:
            return self._check_hosts(call_id, quote, claim, turn, hosts)
        call = self.calls.get(call_id)
        verdict = ground_quote(quote, call, claim=claim, turn=turn)
        if call is None:
            known = ", ".join(c for c, r in self.calls.items() if not r.fleet_call) or "(none yet)"
            why = f"call id {call_id!r} is not a tool call of this session; known: {known}"
            return verdict.model_copy(update={"call_id": call_id, "why": why})
        return verdict

    def _check_hosts(
        self, call_id: str, quote: str, claim: str, turn: int, hosts: list[str]
    ) -> QuoteGrounding:
        """The quote against each named host's own part of fleet call `call_id`."""

        def no(why: str) -> QuoteGrounding:
            return QuoteGrounding(
                call_id=call_id, quote=quote, grounded=False, failure="unknown_host", why=why
            )

        try:
            names = expand(hosts)
        except ValueError as exc:
            return no(f"hosts {hosts!r}: {exc}")
        if call_id not in self.calls:
            return self.check(call_id, quote, claim, turn)
        for host in names:
            part = self.calls.get(part_id(call_id, host))
            if part is None:
                return no(
                    f"call {call_id} has no output of host {host!r}: name `hosts` only for a call "
                    "on a host group (host='@NAME'), and only hosts of that group"
                )
            verdict = ground_quote(quote, part, claim=claim, turn=turn)
            if not verdict.grounded:
                return verdict.model_copy(
                    update={"call_id": call_id, "why": f"host {host}: {verdict.why}"}
                )
        return QuoteGrounding(call_id=call_id, quote=quote, grounded=True)

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


def summarise(findings: list[Finding]) -> str:
    """The final answer in plain text: one line per finding, ungrounded ones flagged."""
    if not findings:
        return "No findings were reported."
    lines = []
    for i, f in enumerate(findings, 1):
        flag = "" if f.grounded else " [UNGROUNDED]"
        lines.append(f"{i}. [{f.verdict}, {f.confidence:.0%}]{flag} {f.claim}")
    return "\n".join(lines)
