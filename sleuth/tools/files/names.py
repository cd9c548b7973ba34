"""File names as the file tools print them: one line each, whatever the name holds.

A name may hold a newline, a carriage return, escape sequences or invisible characters, and
`grep`'s `file:N:text` or list_dir's one entry per line would then show one file as two
lines, one of them forged. Such a name is printed quoted, `$'a\\nb.txt'`, as bash writes it
and `ls --quoting-style=shell-escape` shows it; every other name is printed as it is.
"""

from __future__ import annotations

from sleuth.transcripts.controls import escaped_char

_QUOTED = {"\\": "\\\\", "'": "\\'"}


def _needs_quotes(name: str) -> bool:
    return not name.isprintable() or "\\" in name or name.startswith("$'")


def _escaped(c: str) -> str:
    if c in _QUOTED:
        return _QUOTED[c]
    return c if c.isprintable() else escaped_char(c)


def shown_name(name: str) -> str:
    """`name` itself, or `$'...'` with its unprintable characters escaped.

    >>> shown_name("config.json"), shown_name("a\\nb.json")
    ('config.json', "$'a\\\\nb.json'")
    """
    if not _needs_quotes(name):
        return name
    return "$'" + "".join(_escaped(c) for c in name) + "'"
