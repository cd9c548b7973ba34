"""The text a quote is searched in: whitespace-blind, and knowing each character's line.

```python
flat = Flat.of(output.splitlines())
flat.find(squeeze('{"a": 1}'))         # found in a pretty-printed '{\n  "a": 1\n}'
```

Whitespace never decides a match: a run of it is one space between two word characters and
nothing next to punctuation or at a line's edge. Quotes, outputs and argument values all go
through the same squeeze, and `Flat` keeps the output line each character came from, so a
match can say where it is and an elided quote can be held to consecutive lines.
"""

from __future__ import annotations

from dataclasses import dataclass


def normalise(text: str) -> str:
    """Whitespace runs as one space, ends stripped: how quotes are compared and counted."""
    return " ".join(text.split())


def squeeze(text: str) -> str:
    return Flat.of(text.splitlines()).text


@dataclass(frozen=True)
class Flat:
    """Lines squeezed into one string; `line_of[i]` is the index of the line char i is from."""

    text: str
    line_of: tuple[int, ...]

    @classmethod
    def of(cls, lines: list[str]) -> Flat:
        chars: list[str] = []
        line_of: list[int] = []
        gap = False
        for index, line in enumerate(lines):
            for ch in line:
                if ch.isspace():
                    gap = bool(chars)
                    continue
                if gap and chars[-1].isalnum() and ch.isalnum():
                    chars.append(" ")
                    line_of.append(index)
                chars.append(ch)
                line_of.append(index)
                gap = False
            gap = bool(chars)
        return cls("".join(chars), tuple(line_of))

    def find(self, needle: str, start: int = 0, *, whole: bool = True) -> list[int]:
        """Where `needle` starts at or after `start`; `whole`: only where it neither starts nor
        ends inside a word or number ("3" is not in "30", "layers" is not in "nlayers")."""
        found: list[int] = []
        if not needle:
            return found
        at = self.text.find(needle, start)
        while at >= 0:
            if not whole or not any(self.cut(at, needle)):
                found.append(at)
            at = self.text.find(needle, at + 1)
        return found

    def cut(self, at: int, needle: str) -> tuple[bool, bool]:
        """Does `needle`, found at `at`, start inside a word, and does it end inside one?"""
        end = at + len(needle)
        before = self.text[at - 1] if at > 0 else " "
        after = self.text[end] if end < len(self.text) else " "
        return (
            needle[0].isalnum() and before.isalnum(),
            needle[-1].isalnum() and after.isalnum(),
        )

    def splits_number(self, at: int, needle: str) -> bool:
        """Does the match cut a number in two ("6" of "61")? Then it is another number, not a
        quote cut short."""
        end = at + len(needle)
        before = self.text[at - 1] if at > 0 else " "
        after = self.text[end] if end < len(self.text) else " "
        return (needle[0].isdigit() and before.isdigit()) or (
            needle[-1].isdigit() and after.isdigit()
        )

    def line(self, at: int) -> int:
        return self.line_of[min(at, len(self.line_of) - 1)]

    def covered(self, echoes: list[str]) -> list[bool]:
        """Which characters lie inside an echo of the call's own arguments."""
        mask = [False] * len(self.text)
        for value in echoes:
            at = self.text.find(value)
            while at >= 0:
                mask[at : at + len(value)] = [True] * len(value)
                at = self.text.find(value, at + 1)
        return mask
