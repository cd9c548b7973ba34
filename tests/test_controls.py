"""The one escaper of what a person is shown (`sleuth/transcripts/controls.py`): every character
that could act on a terminal or hide text is written as an escape, everything else as it is,
and the JSON forms mean the same value to a parser."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sleuth.cli.common import describe_request
from sleuth.tools.approval import ApprovalRequest
from sleuth.transcripts.controls import printable_json, shown, shown_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def test_what_acts_is_escaped_and_the_rest_kept() -> None:
    assert shown("plain text, ünïcödé, 模型, tabs\tand\nlines") == (
        "plain text, ünïcödé, 模型, tabs\tand\nlines"
    )
    attack = "a\x1b]52;c;eA==\x1b\\b\rc\x07d\x9b2Je\u2028f\u202eg\u200bh\U000e0001i"
    assert shown(attack) == (
        "a\\x1b]52;c;eA==\\x1b\\b\\rc\\x07d\\x9b2Je\\u2028f\\u202eg\\u200bh\\U000e0001i"
    )
    assert shown("one\r\ntwo\r\n") == "one\ntwo\n"  # a CRLF file's line ends stay line ends
    assert shown("one\ntwo\tthree", keep="") == "one\\ntwo\\tthree"


@given(st.text())
def test_shown_text_holds_nothing_unprintable_but_line_ends_and_tabs(text: str) -> None:
    out = shown(text)
    assert all(c.isprintable() or c in "\n\t" for c in out)
    assert out.count("\n") == text.replace("\r\n", "\n").count("\n")
    assert shown(text, keep="").isprintable()


@given(JSON)
def test_printable_json_is_the_same_value_and_holds_nothing_unprintable(value: object) -> None:
    out = printable_json(value, indent=2)
    assert json.loads(out) == value
    assert all(line.isprintable() for line in out.split("\n"))


def test_the_terminal_prompt_and_the_mcp_form_escape_alike() -> None:
    from sleuth.mcp.approval import message

    argv = ["touch", "\u202efr- mr", "x\u2028It runs: []"]
    request = ApprovalRequest(
        tool="launch_server", host="local", input={"host": "local", "command": argv}, argv=argv
    )
    prompt, form = describe_request(request).plain, message(request)
    assert shown_json(argv) in prompt and shown_json(argv) in form
    for text in (prompt, form):
        assert all(line.isprintable() for line in text.split("\n")), text
