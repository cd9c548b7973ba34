"""Finding a quote in a call's output the way models write quotes.

```python
output = Output.of(call.tool, call.output, call.input)
found = find_quote('method=modelopt, ... ignore (4)', output)   # Found(failure=None, ...)
```

A quote is meaningful (MIN_TOKENS words and MIN_CHARS characters, or a whole line, or a whole
`key: value`) and found whitespace-blind (`flat`) at word edges, outside any echo of the
call's own arguments. `...` or `…` splits it into parts that must each be meaningful and occur
in order, each on the line where the one before ends or on the next. A quote of TRIM_FROM
characters or more that is found only cut inside a word at either end (or beside a `...`) is
trimmed to whole words and grounded on what is left, if that is still meaningful; a number
cut in two is never trimmed ("6" of "61" is another number). Each refusal says which rule
failed and, where the quote was found, on which line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sleuth.agent.evidence.flat import Flat, normalise, squeeze
from sleuth.agent.evidence.lines import bare_line, shown_numbers
from sleuth.transcripts.events import Refusal

MIN_TOKENS = 2
MIN_CHARS = 8
"""A quote shorter than this (words, non-space characters) grounds only as a whole line or a
whole `key: value` of the output: a short fragment occurs almost anywhere. Words are runs of
letters, digits and `_`, so whitespace never makes a quote longer or shorter."""
_WORD = re.compile(r"[A-Za-z0-9_]+")
TRIM_FROM = 24
"""A quote this long (characters) that is cut inside a word is trimmed to whole words."""
ELLIPSIS = re.compile(r"\.{3,}|…")
BARE_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?%?")
KEY_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{2,}")
_SEGMENT_SPLIT = re.compile(r"[,;{}\[\]]")
_CHAINS = 32
"""How many placements of a cut quote are tried before it is refused."""

# The order in which failures explain a refusal best, when a quote was tried as written and
# split at its `...`: the one that got furthest wins.
_RANK = [Refusal.NOT_FOUND, Refusal.TOO_SHORT, Refusal.CUT_IN_WORD, Refusal.ECHO]


@dataclass(frozen=True)
class Output:
    """One call's output, ready to search: as shown and without read_lines' numbers."""

    forms: tuple[Flat, Flat]
    bare: list[str]
    """Its lines without read_lines' numbers."""
    lines: list[str]
    """Its non-blank lines, normalised and without read_lines' numbers: the whole units."""
    numbers: list[int | None]
    """The number a model was shown beside each line."""
    echoes: list[str]
    """The call's own argument values, squeezed."""

    @classmethod
    def of(cls, tool: str, text: str, arguments: Any) -> Output:
        raw = text.splitlines()
        # read_lines numbers its lines ("    12\tcode"); a quote may leave the numbers out.
        bare = [bare_line(line) for line in raw]
        return cls(
            forms=(Flat.of(raw), Flat.of(bare)),
            bare=bare,
            lines=[normalise(line) for line in bare if line.strip()],
            numbers=shown_numbers(tool, text),
            echoes=[squeeze(v) for v in argument_values(arguments)],
        )

    def shown(self, index: int | None) -> int | None:
        return None if index is None else self.numbers[index]


@dataclass(frozen=True)
class Found:
    """Where a quote grounds, or the rule it failed."""

    failure: Refusal | None
    line: int | None = None
    """The index of the output line the quote was found on (or the first of them)."""
    text: str | None = None
    """What a cut quote was grounded on once trimmed to whole words."""
    part: str = ""
    """The part of the quote a failure is about (an elided part, what was left of a cut one)."""
    splits_number: bool = False
    """Refused as cut inside a number: it quotes another number."""


def find_quote(quote: str, output: Output) -> Found:
    """Find a normalised quote as written, then, if it has a `...`, as its parts."""
    found = _attempt([quote], output, quote)
    parts = [p.strip() for p in ELLIPSIS.split(quote)]
    parts = [p for p in parts if p]
    if found.failure is None or not ELLIPSIS.search(quote) or not parts:
        return found
    split = _attempt(parts, output, quote)
    if split.failure is None or _RANK.index(split.failure) > _RANK.index(found.failure):
        return split
    return found


def find_number(number: str, claim: str, output: Output) -> Found:
    """A bare number grounds only as a whole number on a line that also names a word of the
    claim, outside the call's echoed arguments."""
    keys = {w.lower() for w in KEY_WORD.findall(claim)}
    seen: int | None = None
    for index, line in enumerate(output.bare):
        flat = Flat.of([line])
        hits = flat.find(number)
        if not hits:
            continue
        seen = index if seen is None else seen
        named = keys & {w.lower() for w in KEY_WORD.findall(flat.text)}
        mask = flat.covered(output.echoes)
        if named and any(_real(flat, mask, at, number) for at in hits):
            return Found(None, index)
    return Found(Refusal.BARE_NUMBER, seen)


def meaningful(text: str, lines: list[str]) -> bool:
    """Long enough to be specific, or a whole unit of the output: a line, a `key: value`, or a
    whole quoted JSON value (`LlamaForCausalLM` from `["LlamaForCausalLM"]`)."""
    if _long_enough(text):
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


def argument_values(raw: Any) -> list[str]:
    """Every string the model put into the call's input, normalised; short ones are too common
    in ordinary output to count as an echo."""
    if isinstance(raw, str):
        text = normalise(raw)
        return [text] if len(text) >= 3 else []
    if isinstance(raw, dict):
        return [v for value in raw.values() for v in argument_values(value)]
    if isinstance(raw, list):
        return [v for value in raw for v in argument_values(value)]
    return []


def _attempt(parts: list[str], output: Output, quote: str) -> Found:
    for part in parts:
        if not meaningful(part, output.lines):
            return _short(part, output, quote)
    joined = " ".join(parts)
    if len(parts) > 1 and not _long_enough(joined):
        return Found(Refusal.TOO_SHORT, part=joined)
    needles = [squeeze(p) for p in parts]
    for part, needle in zip(parts, needles, strict=True):
        if any(needle in echo for echo in output.echoes):
            return Found(Refusal.ECHO, _where(part, output), part=part)
    for flat in output.forms:
        mask = flat.covered(output.echoes)
        for chain in _chains(needles, flat, mask, whole=True, real=True):
            return Found(None, flat.line(chain[0]))
    for flat in output.forms:
        for chain in _chains(needles, flat, [False] * len(flat.text), whole=True, real=False):
            return Found(Refusal.ECHO, flat.line(chain[0]))
    return _cut(parts, needles, output, quote)


def _short(part: str, output: Output, quote: str) -> Found:
    """A part too short to ground. Found only cut inside a word in a quote long enough to be
    trimmed, the cut is the rule it broke: trimming left too little (the first 31 characters
    of one long name leave nothing), and the mend is to quote the whole word."""
    needle = squeeze(part)
    short = Found(Refusal.TOO_SHORT, _where(part, output), part=part)
    if len(quote) < TRIM_FROM or any(flat.find(needle) for flat in output.forms):
        return short
    for flat in output.forms:
        for at in flat.find(needle, whole=False):
            if flat.splits_number(at, needle):
                return Found(Refusal.CUT_IN_WORD, flat.line(at), splits_number=True)
            left = " … ".join(_trimmed([part], [needle], flat, [at]) or [])
            return Found(Refusal.CUT_IN_WORD, flat.line(at), part=left)
    return short


def _cut(parts: list[str], needles: list[str], output: Output, quote: str) -> Found:
    """The quote found only cut inside a word: trimmed to whole words, if long enough."""
    refused: Found | None = None
    for flat in output.forms:
        mask = flat.covered(output.echoes)
        for chain in _chains(needles, flat, mask, whole=False, real=True, limit=_CHAINS):
            line = flat.line(chain[0])
            trimmed = _trimmed(parts, needles, flat, chain)
            if trimmed is None or len(quote) < TRIM_FROM:
                refused = refused or Found(Refusal.CUT_IN_WORD, line, splits_number=trimmed is None)
                continue
            left = " … ".join(trimmed)
            if not trimmed or not all(meaningful(p, output.lines) for p in trimmed):
                refused = refused or Found(Refusal.CUT_IN_WORD, line, part=left)
                continue
            again = [squeeze(p) for p in trimmed]
            if any(n in echo for n in again for echo in output.echoes):
                refused = refused or Found(Refusal.ECHO, line, part=left)
                continue
            for placed in _chains(again, flat, mask, whole=True, real=True):
                return Found(None, flat.line(placed[0]), text=left)
            refused = refused or Found(Refusal.CUT_IN_WORD, line, part=left)
    return refused or Found(Refusal.NOT_FOUND)


def _trimmed(
    parts: list[str], needles: list[str], flat: Flat, chain: list[int]
) -> list[str] | None:
    """Each part with the word it was cut in dropped; None when a cut splits a number."""
    out = []
    for part, needle, at in zip(parts, needles, chain, strict=True):
        if flat.splits_number(at, needle):
            return None
        starts_cut, ends_cut = flat.cut(at, needle)
        words = part.split()
        words = words[1 if starts_cut else 0 : len(words) - 1 if ends_cut else len(words)]
        if words:
            out.append(" ".join(words))
    return out


def _chains(
    needles: list[str],
    flat: Flat,
    mask: list[bool],
    *,
    whole: bool,
    real: bool,
    limit: int = 1,
) -> Iterator[list[int]]:
    """Placements of the parts, in order, each starting on the line where the one before
    ends or on the next; at most `limit` of them."""
    budget = [limit]

    def walk(i: int, start: int, prev_line: int | None) -> Iterator[list[int]]:
        for at in flat.find(needles[i], start, whole=whole):
            if budget[0] <= 0:
                return
            if prev_line is not None and flat.line(at) > prev_line + 1:
                return
            if real and not _real(flat, mask, at, needles[i]):
                continue
            end = at + len(needles[i])
            if i == len(needles) - 1:
                budget[0] -= 1
                yield [at]
                continue
            for rest in walk(i + 1, end, flat.line(end - 1)):
                yield [at, *rest]

    yield from walk(0, 0, None)


def _real(flat: Flat, mask: list[bool], at: int, needle: str) -> bool:
    """The match shows something besides the echoed arguments: a letter or digit outside them."""
    return any(
        flat.text[i].isalnum() and not mask[i] for i in range(at, min(at + len(needle), len(mask)))
    )


def _where(part: str, output: Output) -> int | None:
    needle = squeeze(part)
    for flat in output.forms:
        hits = flat.find(needle)
        if hits:
            return flat.line(hits[0])
    return None


def _long_enough(text: str) -> bool:
    return len(_WORD.findall(text)) >= MIN_TOKENS and len(text.replace(" ", "")) >= MIN_CHARS
