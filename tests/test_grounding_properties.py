"""Property tests for the grounding check: what must never ground, and what always must.

Random short quotes and echoes of a call's own arguments never ground a claim; any real line
of a successful call's output, read in an earlier turn, always does.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sleuth.agent.findings import MIN_CHARS, CallRecord, ground_quote, normalise

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789.:/=-", min_size=1, max_size=12)
LINE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)
OUTPUT = st.lists(LINE, min_size=1, max_size=12).map("\n".join)


def _call(output: str, args: dict[str, object] | None = None, ok: bool = True) -> CallRecord:
    return CallRecord("c1", "grep", args or {}, output, ok, 1)


@settings(max_examples=300, deadline=None)
@given(output=OUTPUT, data=st.data())
def test_a_short_fragment_that_is_not_a_whole_line_never_grounds(
    output: str, data: st.DataObject
) -> None:
    flat = normalise(output)
    start = data.draw(st.integers(0, max(0, len(flat) - 1)))
    length = data.draw(st.integers(1, MIN_CHARS - 1))
    quote = flat[start : start + length].strip()
    lines = {normalise(line).rstrip(",") for line in output.splitlines()}
    segments = {normalise(s) for line in lines for s in line.replace(",", "\n").splitlines()}
    if not quote or quote.rstrip(",") in lines | segments:
        return  # a whole line or key: value may be short; that is the rule
    verdict = ground_quote(quote, _call(output), claim="anything at all", turn=2)
    assert not verdict.grounded, (quote, output)


@settings(max_examples=300, deadline=None)
@given(value=LINE.filter(lambda v: len(v.strip()) >= 3), prefix=LINE, data=st.data())
def test_an_echo_of_an_argument_never_grounds(value: str, prefix: str, data: st.DataObject) -> None:
    output = f"no matches for {value!r} under /srv\n{prefix}"
    norm = normalise(value)
    start = data.draw(st.integers(0, len(norm) - 1))
    quote = norm[start:].strip() or norm
    # The second line is real output, not an echo: a quote it holds may ground (found by a
    # fresh-clone CI run: "0" from "a00:0" for a claim naming a00).
    assume(quote not in normalise(prefix))
    call = _call(output, {"host": "local", "pattern": value, "path": "/srv"})
    verdict = ground_quote(quote, call, claim=f"{value} is set", turn=2)
    assert not verdict.grounded, (quote, output)


@settings(max_examples=300, deadline=None)
@given(output=OUTPUT, data=st.data())
def test_a_real_output_line_always_grounds(output: str, data: st.DataObject) -> None:
    lines = [line for line in output.splitlines() if any(ch.isalnum() for ch in line)]
    if not lines:
        return
    line = data.draw(st.sampled_from(lines))
    verdict = ground_quote(line, _call(output), claim="what the output says", turn=2)
    if not verdict.grounded:
        # A line that is only a bare number needs its key; nothing else may fail.
        assert verdict.failure == "bare_number", (line, verdict)


@settings(max_examples=100, deadline=None)
@given(output=OUTPUT, data=st.data())
def test_no_line_grounds_in_the_turn_that_made_the_call(output: str, data: st.DataObject) -> None:
    line = data.draw(st.sampled_from(output.splitlines()))
    assert not ground_quote(line, _call(output), claim="x", turn=1).grounded
