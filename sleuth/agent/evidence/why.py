"""What the model is told when a piece of its evidence is refused: the rule, and where.

Each sentence names the rule the evidence failed and, when the quote was found, the line it
was found on, so the one mend a finding gets can fix the right thing.
"""

from __future__ import annotations

from sleuth.agent.evidence.lines import MAX_LINES
from sleuth.agent.evidence.quotes import MIN_CHARS, MIN_TOKENS, TRIM_FROM, Found
from sleuth.transcripts.events import Refusal


def refused_quote(found: Found, quote: str, text: str, where: str, line: int | None) -> str:
    """Why `quote` (normalised: `text`) from `where` did not ground."""
    on = f" (line {line})" if line is not None else ""
    cite = f", or cite its line with lines={str(line)!r}" if line is not None else ""
    if found.failure == Refusal.TOO_SHORT:
        short = found.part or text
        return (
            f"{short!r} is too short to ground anything (at least {MIN_TOKENS} words and "
            f"{MIN_CHARS} characters, or a whole line, or a whole `key: value`; each part of a "
            f"quote with `...` counts on its own){_found_on(line)}"
        )
    if found.failure == Refusal.BARE_NUMBER:
        return (
            f"the number {quote!r} must be quoted together with its key (e.g. `name: {text}`, "
            f"across lines if the output puts them apart), or occur as a whole number on a "
            f"line of {where} that names the thing the claim is about"
        )
    if found.failure == Refusal.ECHO:
        what = found.part or text
        return (
            f"{what!r} occurs in {where}{on} only as an echo of the call's own arguments: it "
            f"shows what was asked, not what was found; quote the whole output line it is on"
            f"{cite}"
        )
    if found.failure == Refusal.CUT_IN_WORD:
        return _cut(found, quote, text, f"{where}{on}") + cite
    return (
        f"quote {quote!r} does not occur in {where} (whitespace may differ and `...` may mark "
        "a gap, but the words must be the output's); copy it from the output, or cite the "
        "lines it is on"
    )


def refused_lines(failure: Refusal, spec: str, where: str, shown: str) -> str:
    """Why a reference to lines `spec` of `where` did not ground; `shown`: what it showed."""
    if failure == Refusal.TOO_MANY_LINES:
        return f"lines {spec} of {where} are more than {MAX_LINES}; cite the few that matter"
    if failure == Refusal.TOO_SHORT:
        return f"lines {spec} of {where} are blank; cite lines with text on them"
    return (
        f"{where} shows {shown}; lines {spec} are not among them. Cite the numbers shown at "
        "the left of its lines"
    )


def _cut(found: Found, quote: str, text: str, where: str) -> str:
    if found.splits_number:
        return (
            f"{quote!r} occurs in {where} only cut inside a number: it quotes another number "
            "there, so quote the number whole"
        )
    if len(text) < TRIM_FROM:
        return (
            f"{quote!r} occurs in {where} only cut inside a word: quote whole words (a quote "
            f"under {TRIM_FROM} characters is not trimmed)"
        )
    left = f"what is left is {found.part!r}" if found.part else "nothing is left"
    return (
        f"{quote!r} occurs in {where} only cut inside a word, and too short after trimming: "
        f"with the cut words dropped, {left} (at least {MIN_TOKENS} words and {MIN_CHARS} "
        "characters, or a whole line, are needed); quote the whole word it cuts, or more of "
        "the line"
    )


def _found_on(line: int | None) -> str:
    if line is None:
        return ""
    return f"; it is on line {line}: quote that whole line, or cite it with lines={str(line)!r}"
