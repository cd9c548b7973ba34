"""Property tests for quotes as models write them and for references to lines.

Whitespace around punctuation never decides a match; an elision joins only parts on
consecutive lines, in order; a long line cut inside a word is trimmed, never refused as
missing; a reference grounds exactly the lines shown, with their recorded text.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sleuth.agent.evidence.flat import squeeze
from sleuth.agent.evidence.lines import MAX_LINES
from sleuth.agent.findings import CallRecord, ground_lines, ground_quote

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=3, max_size=10)
PUNCT = st.sampled_from([":", "=", ",", ";", "[", "]", "(", ")", "/", "-"])
TOKEN = st.one_of(WORD, PUNCT)
LINE = st.lists(TOKEN, min_size=2, max_size=10).map(" ".join)
OUTPUT = st.lists(LINE, min_size=3, max_size=12).map("\n".join)


def _call(output: str) -> CallRecord:
    return CallRecord("c1", "grep", {}, output, True, 1)


def _wordy(char: str) -> bool:
    return char.isalnum() or char == "_"


def _words(line: str) -> int:
    return sum(1 for t in line.split() if t[0].isalnum())


@settings(max_examples=200, deadline=None)
@given(output=OUTPUT, data=st.data())
def test_a_line_with_its_spaces_moved_around_punctuation_still_grounds(
    output: str, data: st.DataObject
) -> None:
    lines = output.splitlines()
    line = data.draw(st.sampled_from(lines))
    assume(_words(line) >= 2)
    tokens = line.split()
    # Only the spaces beside punctuation go; `_` is part of a word (`0000_ 000` stays two).
    glued = "".join(
        t + (" " if i + 1 < len(tokens) and _wordy(t[-1]) and _wordy(tokens[i + 1][0]) else "")
        for i, t in enumerate(tokens)
    )
    assume(len(glued.replace(" ", "")) >= 8)
    verdict = ground_quote(glued, _call(output), claim="x", turn=2)
    assert verdict.grounded, (glued, output, verdict.why)


@settings(max_examples=200, deadline=None)
@given(output=OUTPUT, data=st.data())
def test_an_elision_of_two_consecutive_lines_grounds_and_of_distant_lines_never(
    output: str, data: st.DataObject
) -> None:
    lines = output.splitlines()
    i = data.draw(st.integers(0, len(lines) - 3))
    first, second, third = lines[i], lines[i + 1], lines[i + 2]
    assume(all(_words(x) >= 2 and len(x.replace(" ", "")) >= 8 for x in (first, third)))
    assume(_words(second) >= 2 and len(second.replace(" ", "")) >= 8)
    near = ground_quote(f"{first} ... {second}", _call(output), claim="x", turn=2)
    assert near.grounded, (first, second, near.why)
    # Each part found only where it stands, two lines apart: the elision may not join them.
    flat = squeeze(output)
    assume(flat.count(squeeze(first)) == 1 and flat.count(squeeze(third)) == 1)
    far = ground_quote(f"{first} … {third}", _call(output), claim="x", turn=2)
    assert not far.grounded and far.failure == "not_found", (first, third, output)


@settings(max_examples=200, deadline=None)
@given(
    before=OUTPUT,
    line=st.lists(TOKEN, min_size=6, max_size=12).map(" ".join),
    after=OUTPUT,
    data=st.data(),
)
def test_a_long_line_cut_inside_a_word_is_never_refused_as_missing(
    before: str, line: str, after: str, data: st.DataObject
) -> None:
    cuts = [k for k in range(24, len(line)) if line[k - 1].isalnum() and line[k].isalnum()]
    assume(cuts)
    cut = data.draw(st.sampled_from(cuts))
    output = f"{before}\n{line}\n{after}"
    verdict = ground_quote(line[:cut], _call(output), claim="x", turn=2)
    assert verdict.grounded or verdict.failure in ("cut_in_word", "too_short"), verdict.why
    if verdict.grounded and verdict.text is not None:
        assert verdict.text in output and len(verdict.text) < cut


@settings(max_examples=200, deadline=None)
@given(output=OUTPUT, first=st.integers(1, 20), length=st.integers(0, MAX_LINES + 3))
def test_a_reference_grounds_exactly_the_lines_shown(output: str, first: int, length: int) -> None:
    lines = output.splitlines()
    last = first + length
    verdict = ground_lines(f"{first}-{last}", _call(output), claim="x", turn=2)
    inside = last <= len(lines) and length < MAX_LINES
    assert verdict.grounded == inside, (first, last, len(lines), verdict.why)
    if inside:
        assert verdict.text == "\n".join(lines[first - 1 : last])
