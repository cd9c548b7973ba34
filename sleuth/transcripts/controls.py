"""Text from hosts and models as a person is shown it: every character that could act on a
terminal (an escape sequence, a carriage return, a bell) or change what is seen without being
seen (a bidi override, a line separator, a zero-width character) written as an escape,
`\\x1b`, `\\u202e`; every other character as it is.

One implementation for every place Sleuth shows such text: the approval prompt and the MCP
approval form (`shown_json`), the file tools' odd names, tool output, model text, errors and
reports (`shown`). What is recorded is never changed: the transcript and `--json` keep every
character (JSON writes the ones that act as escapes too), so the escape is only in what is
shown. A backslash is shown as it is, so a file that holds the four characters `\\x1b` reads
the same as one that holds the escape character; the transcript tells them apart.
"""

from __future__ import annotations

import json
from typing import Any

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
LINES = "\n\t"
"""What `shown` keeps by default: line ends and tabs lay text out and cannot act."""


def escaped_char(c: str) -> str:
    """One character as an escape: `\\n`, `\\x1b`, `\\u202e`, `\\U000e0001`."""
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: str, keep: str = LINES) -> str:
    """`text` with every unprintable character but those in `keep` escaped. A CRLF line end
    stays a line end where newlines are kept (a terminal shows it as one)."""
    if text.isprintable():
        return text
    if "\n" not in keep:
        return _escaped(text, keep)
    lines = text.replace("\r\n", "\n").split("\n")
    return "\n".join(line if line.isprintable() else _escaped(line, keep) for line in lines)


def _escaped(text: str, keep: str) -> str:
    return "".join(c if c.isprintable() or c in keep else escaped_char(c) for c in text)


def shown_json(value: Any, indent: int | None = None, sort_keys: bool = False) -> str:
    """`value` as JSON with every non-ASCII or control character escaped (`\\u202e`), as the
    approval prompt and the MCP approval form show a call: nothing in an argument can restyle,
    reorder or hide the rest, and a look-alike letter shows as the code it is."""
    return json.dumps(value, indent=indent, sort_keys=sort_keys)


def printable_json(value: Any, indent: int | None = None) -> str:
    """`value` as JSON that reads as written (`ensure_ascii=False`), but with every unprintable
    character escaped as JSON escapes it (`\\u202e`): the same value to a parser, and nothing
    that acts when the output is shown on a terminal."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if text.isprintable():
        return text
    # Outside a string JSON holds only ASCII and the indent's newlines, so any other
    # character is inside one, where its \\u escape means the same character.
    return "".join(c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text)
