"""Find the values that key paths mark as secrets in structured text files (stdlib only).

Sleuth sends this program to a host and runs it as `python3 - RULES PATH...`; on this
machine (and as the fallback for a host without python3) it is imported and `scan` is
called directly. RULES is JSON from `sleuth.transcripts.redact` (how a key splits into
words and which words mark a secret), so the decision lives in one place.

A file is scanned as JSON when it parses as JSON (positions kept, so a value is found
whichever line it sits on), else line by line as YAML / TOML / INI / .env / properties:
a value belongs to the key before it while lines stay more indented, a quote or bracket
stays open, or a line ends in a backslash. The line scanner is deliberately generous: a
line it cannot place under a secret key's value is kept only when it is less indented.

Output: {"files": {path: {"lines": {"N": "line N with secrets replaced"}, "error": ...}}}
with only the lines that changed.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
import unicodedata
from typing import TYPE_CHECKING, Any

MAX_SCAN_BYTES = 64 * 1024 * 1024
MIN_ECHO = 6
"""A secret value this long is also hidden where it appears away from its key."""
SOFT_PLAIN = re.compile(r"-?[0-9][0-9_.eE+-]*|true|false|True|False|null|~|")

if TYPE_CHECKING:
    from collections.abc import Callable

    Span = tuple[int, int, str]


def _unescape(match: re.Match[str]) -> str:
    text = match.group()
    code = int(text[2:] if text[0] == "\\" else text[1:], 16)
    return chr(code) if code < 0x110000 else text


class Rules:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.words = re.compile(doc["words"])
        self.rules = [(label, re.compile(rule)) for label, rule in doc["rules"]]
        self.squashed = re.compile(doc["squashed"])
        self.escapes = re.compile(doc["escapes"])
        self.soft = frozenset(doc["soft"])
        self.stems = tuple(doc["stems"])
        self._cache: dict[str, str | None] = {}

    def plain(self, key: str) -> str:
        """The key as a reader sees it: `pass\\u0077ord`, `pass%77ord`, fullwidth letters
        and invisible characters all read as `password` (sleuth.transcripts.secret_keys)."""
        if "\\" in key or "%" in key:
            key = self.escapes.sub(_unescape, key)
        if not key.isascii():
            folded = unicodedata.normalize("NFKC", key)
            key = "".join(c for c in folded if unicodedata.category(c) != "Cf")
        return key

    def label(self, key: str) -> str | None:
        if key not in self._cache:
            plain = self.plain(key)
            lowered = plain.lower()
            if not any(stem in lowered for stem in self.stems):
                return None
            words = "_" + "_".join(w.lower() for w in self.words.findall(plain)) + "_"
            found = next((lb for lb, rule in self.rules if rule.search(words)), None)
            squashed = self.squashed.search(re.sub("[^a-z0-9]+", "", lowered))
            self._cache[key] = found or (squashed.lastgroup if squashed else None)
        return self._cache[key]

    def hides(self, label: str | None, value: str) -> bool:
        """Whether a value under `label` is hidden: always, except numbers under soft words."""
        if label is None:
            return False
        return label not in self.soft or SOFT_PLAIN.fullmatch(value.strip(" \t,'\"")) is None


# ---- JSON, with the position of every scalar ------------------------------------------

_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"')
_JSON_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_WS = re.compile(r"[ \t\r\n]*")


class _NotJson(Exception):
    pass


def _json_spans(text: str, rules: Rules) -> list[tuple[int, int, str]] | None:
    """(start, end, label) of every hidden scalar, or None when `text` is not one JSON value."""
    out: list[tuple[int, int, str]] = []

    def ws(pos: int) -> int:
        match = _WS.match(text, pos)
        return match.end() if match else pos

    def value(pos: int, label: str | None, depth: int) -> int:
        if depth > 200:
            raise _NotJson
        pos = ws(pos)
        ch = text[pos : pos + 1]
        if ch == "{":
            pos = ws(pos + 1)
            if text.startswith("}", pos):
                return pos + 1
            while True:
                key = _JSON_STRING.match(text, pos)
                if key is None:
                    raise _NotJson
                name = json.loads(key.group())
                pos = ws(key.end())
                if not text.startswith(":", pos):
                    raise _NotJson
                pos = ws(value(pos + 1, label or rules.label(name), depth + 1))
                if text.startswith(",", pos):
                    pos = ws(pos + 1)
                elif text.startswith("}", pos):
                    return pos + 1
                else:
                    raise _NotJson
        if ch == "[":
            pos = ws(pos + 1)
            if text.startswith("]", pos):
                return pos + 1
            while True:
                pos = ws(value(pos, label, depth + 1))
                if text.startswith(",", pos):
                    pos += 1
                elif text.startswith("]", pos):
                    return pos + 1
                else:
                    raise _NotJson
        match = (_JSON_STRING if ch == '"' else _JSON_SCALAR).match(text, pos)
        if match is None:
            raise _NotJson
        if rules.hides(label, match.group()) and match.group() != '""':
            assert label is not None
            out.append((match.start(), match.end(), label))
        return match.end()

    try:
        end = value(0, None, 0)
    except (_NotJson, ValueError, RecursionError):
        return None
    return out if ws(end) == len(text) else None


def _json_without_secret_keys(text: str, rules: Rules) -> bool:
    """Whether `text` is JSON none of whose keys marks a secret (so nothing is hidden)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    todo = [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if any(rules.label(key) for key in item):
                return False
            todo.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            todo.extend(v for v in item if isinstance(v, (dict, list)))
    return True


def _offsets_to_lines(text: str, spans: list[tuple[int, int, str]]) -> dict[int, list[Span]]:
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    out: dict[int, list[Span]] = {}
    for start, end, label in spans:
        line = bisect.bisect_right(starts, start) - 1
        out.setdefault(line + 1, []).append((start - starts[line], end - starts[line], label))
    return out


# ---- Everything else, line by line ----------------------------------------------------

_KEY_LINE = re.compile(
    r"""(?P<indent>[ \t]*)(?P<dash>(?:-[ \t]+)*)(?:export[ \t]+)?"""
    r"""(?P<key>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s:=#"'\[\]{},<>][^:=#\[\]{},<>"']*?)"""
    r"""[ \t]*(?P<sep>:(?=[ \t]|$)|=|:(?=[^/]))[ \t]*"""
)
_SECTION = re.compile(r"[ \t]*\[\[?(?P<name>[^\]=]+)\]\]?[ \t]*(?:[#;].*)?$")
_XML = re.compile(r"<(?P<key>[\w:.-]+)(?:[ \t][^>]*)?>(?P<value>[^<]+)</(?P=key)>")
_NETRC = re.compile(r"(?:^|[ \t])(?P<key>password|passwd|account)[ \t]+(?P<value>\S+)")
_BLOCK = re.compile(r"(?:[&!][^ \t]*[ \t]+)*[|>][0-9+-]*[ \t]*(?:#.*)?")
_CLOSERS = {"[": "]", "{": "}"}


def _indent_of(line: str) -> int:
    stripped = line.lstrip(" \t")
    dash = re.match(r"(?:-[ \t]+)*", stripped)
    return len(line) - len(stripped) + (dash.end() if dash else 0)


def _bracket_depth(text: str, depth: int, quote: str) -> tuple[int, str, int]:
    """Walk `text` from inside `depth` open brackets (and `quote` if one is open).
    Returns the new depth, the open quote ("" for none) and where depth reached 0 (or -1)."""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return 0, "", i + 1
        i += 1
    return depth, quote, -1


def _open_quote(value: str) -> str:
    """The closing quote still owed at the end of `value`, or ""."""
    for triple in ('"""', "'''"):
        if value.startswith(triple):
            return "" if value.count(triple) >= 2 else triple
    if value[:1] in "\"'":
        q = value[0]
        body = value[1:]
        if q == '"':
            body = re.sub(r"\\.", "", body)
        return "" if q in body else q
    return ""


class _LineScan:
    """The line scanner's walk over one file: YAML / TOML / INI / .env / properties keys, a
    value that runs on past its line (a YAML block, an open quote or bracket, a value on the
    next line, a trailing backslash), and the netrc and XML values that sit inside a line."""

    def __init__(self, rules: Rules, netrc: bool) -> None:
        self.rules = rules
        self.netrc = netrc
        self.out: dict[int, list[Span]] = {}
        self.stack: list[tuple[int, str | None]] = []  # (a key's indent, its label or a parent's)
        self.section: str | None = None
        self.state: tuple[str, int, str, str] | None = None  # (kind, indent, label, closer)
        self.depth = 0

    def scan(self, lines: list[str]) -> dict[int, list[Span]]:
        for n, line in enumerate(lines, 1):
            body = line.rstrip("\r")
            if self.state is not None and self._continued(n, body):
                continue
            self._inline(n, body)
            stripped = body.strip()
            if not stripped or stripped[0] in "#;" or stripped.startswith("//"):
                continue
            if not self._section(body):
                self._key_line(n, body)
        return self.out

    def _hide(self, n: int, start: int, end: int, label: str) -> None:
        if end > start:
            self.out.setdefault(n, []).append((start, end, label))

    def _continued(self, n: int, body: str) -> bool:
        """Hide `body` if it carries on the secret value begun above it; True when it did
        (the line is done), False when the value ended and the line is read afresh."""
        assert self.state is not None
        kind, ind, owner, closer = self.state
        if kind == "block":  # YAML `key: |`: every blank or more indented line
            if not body.strip() or _content(body) > ind:
                self._hide(n, _content(body), len(body), owner)
                return True
        elif kind == "quote":
            at = body.find(closer)
            self._hide(n, 0, len(body) if at < 0 else at + len(closer), owner)
            self.state = None if at >= 0 else self.state
            return True
        elif kind == "bracket":
            self.depth, quote, end = _bracket_depth(body, self.depth, closer)
            self._hide(n, 0, len(body) if end < 0 else end, owner)
            self.state = None if end >= 0 else ("bracket", ind, owner, quote)
            return True
        elif kind == "next":  # JSONC or YAML `key:` with its value on the next line
            if not body.strip() or body.strip()[0] in "#;":
                return True
            self.state = None
            key_line = _KEY_LINE.match(body)
            if (key_line is None or not key_line.group("key").strip()) and not _SECTION.match(body):
                self._hide(n, _content(body), len(body), owner)
                return True
            return False
        elif kind == "backslash":
            self._hide(n, 0, len(body), owner)
            self.state = self.state if body.endswith("\\") else None
            return True
        self.state = None
        return False

    def _inline(self, n: int, body: str) -> None:
        """netrc's `password VALUE` and XML's `<key>VALUE</key>`, wherever on the line."""
        if self.netrc:
            for m in _NETRC.finditer(body):
                self._hide(n, m.start("value"), m.end("value"), "password")
        for m in _XML.finditer(body):
            xml_label = self.rules.label(m.group("key"))
            if self.rules.hides(xml_label, m.group("value")):
                assert xml_label is not None
                self._hide(n, m.start("value"), m.end("value"), xml_label)

    def _section(self, body: str) -> bool:
        """A TOML / INI `[section]` header: its label covers the keys under it."""
        header = _SECTION.match(body)
        if header is None or _content(body) != 0:
            return False
        parts = re.split(r"[.\s]+", header.group("name").strip().strip("\"'"))
        self.section = next((lb for p in parts if (lb := self.rules.label(p.strip("\"'")))), None)
        self.stack = []
        return True

    def _key_line(self, n: int, body: str) -> None:
        """A `key: value` / `key = value` line, or a line under the key above it."""
        ind = _indent_of(body)
        match = _KEY_LINE.match(body)
        while self.stack and self.stack[-1][0] >= ind:
            self.stack.pop()
        if match is None or not match.group("key").strip():
            parent = self.stack[-1][1] if self.stack else None
            if parent is not None:
                self._hide(n, ind, len(body), parent)
            return
        key = match.group("key").strip().strip("\"'")
        own = next((lb for p in key.split(".") if (lb := self.rules.label(p))), None)
        label = own or (self.stack[-1][1] if self.stack else None) or self.section
        self.stack.append((ind, label))
        if label is not None:
            self._value(n, body, match, ind, label)

    def _value(self, n: int, body: str, match: re.Match[str], ind: int, label: str) -> None:
        """A secret key's value: hidden, and the state set if it runs on past this line."""
        value = body[match.end() :]
        if not value.strip() or value.strip().startswith("#"):
            self.state = ("next", ind, label, "")
            return
        if match.group("sep") == ":" and _BLOCK.fullmatch(value):
            self.state = ("block", ind, label, "")
            return
        if not self.rules.hides(label, value):
            return
        self._hide(n, match.end(), len(body), label)
        quote = _open_quote(value.strip())
        if value.strip()[:1] in _CLOSERS:
            self.depth, open_q, end = _bracket_depth(value, 0, "")
            if end < 0 and self.depth > 0:
                self.state = ("bracket", ind, label, open_q)
        elif quote:
            self.state = ("quote", ind, label, quote)
        elif value.endswith("\\"):
            self.state = ("backslash", ind, label, "")


def _content(line: str) -> int:
    """Where a line's content starts, after its indent."""
    return len(line) - len(line.lstrip(" \t"))


# ---- Both ------------------------------------------------------------------------------


def _echoes(lines: list[str], spans: dict[int, list[Span]]) -> None:
    """Hide a secret value's other appearances in the same file, away from its key."""
    values: dict[str, str] = {}
    for n, found in spans.items():
        for start, end, label in found:
            piece = lines[n - 1][start:end].strip(" \t,;\r").strip("\"'").strip()
            if len(piece) >= MIN_ECHO:
                values.setdefault(piece, label)
    if not values:
        return
    pattern = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
    for n, line in enumerate(lines, 1):
        for m in pattern.finditer(line):
            spans.setdefault(n, []).append((m.start(), m.end(), values[m.group()]))


_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----")
CODE_SUFFIXES = frozenset(
    [
        ".py",
        ".pyi",
        ".pyx",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".cu",
        ".cuh",
        ".rs",
        ".go",
        ".java",
        ".js",
        ".ts",
        ".md",
        ".rst",
    ]
)
"""Source code is read as code (its `token = next_token()` is no configuration): only
private-key blocks are looked for there; the pattern redaction still covers every line."""


def _pem_spans(lines: list[str]) -> dict[int, list[Span]]:
    """Every line of a private-key block, BEGIN to END (or to the end of the file)."""
    out: dict[int, list[Span]] = {}
    inside = False
    for n, line in enumerate(lines, 1):
        begin = _PEM_BEGIN.search(line)
        if begin is not None or inside:
            start = begin.start() if begin is not None and not inside else 0
            end = _PEM_END.search(line, start)
            out[n] = [(start, end.end() if end else len(line), PEM)]
            inside = end is None
    return out


PEM = "private-key"


COLON_FILES = {"pgpass": 4, "htpasswd": 1}
"""Files of colon-separated fields whose last field is a password (`host:port:db:user:pw`)."""


def _after_colons(line: str, count: int) -> int | None:
    """Where the field after the `count`-th unescaped colon starts, or None."""
    i, seen = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] == ":":
            seen += 1
            if seen == count:
                return i + 1
        i += 1
    return None


def scan_text(text: str, name: str, rules: Rules) -> dict[int, list[Span]]:
    """Line number (1-based, lines split on "\\n" only) -> spans of hidden values on it."""
    lines = text.split("\n")
    if os.path.splitext(name)[1].lower() in CODE_SUFFIXES:
        return _pem_spans(lines)
    spans: dict[int, list[Span]] | None = None
    if text.lstrip()[:1] in ("{", "[") and _json_without_secret_keys(text, rules):
        return _pem_spans(lines)  # a safetensors index or tokenizer: parsed at C speed
    if text.lstrip()[:1] in ("{", "["):
        found = _json_spans(text, rules)
        if found is not None:
            spans = _offsets_to_lines(text, found)
    if spans is None:
        base = os.path.basename(name).lstrip("._")
        spans = _LineScan(rules, base == "netrc").scan(lines)
        if base in COLON_FILES:
            for n, line in enumerate(lines, 1):
                at = _after_colons(line, COLON_FILES[base])
                if at is not None and at < len(line):
                    spans.setdefault(n, []).append((at, len(line), "password"))
        # JSON Lines, and JSON objects logged one per line.
        for n, line in enumerate(lines, 1):
            body = line.strip()
            if body[:1] in ("{", "[") and (one := _json_spans(body, rules)):
                at = line.index(body[0])
                spans.setdefault(n, []).extend((s + at, e + at, lb) for s, e, lb in one)
    _echoes(lines, spans)
    for n, found in _pem_spans(lines).items():
        spans.setdefault(n, []).extend(found)
    return spans


def apply(line: str, spans: list[Span]) -> str:
    """`line` with each span replaced by `[REDACTED:by-key LABEL]` (overlaps merged)."""
    merged: list[list[Any]] = []
    for start, end, label in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    out, done = [], 0
    for start, end, label in merged:
        marker = f"[REDACTED:{PEM}]" if label == PEM else f"[REDACTED:by-key {label}]"
        out += [line[done:start], marker]
        done = end
    return "".join(out) + line[done:]


def scan_bytes(raw: bytes, name: str, rules: Rules) -> dict[int, str]:
    """Line number -> the redacted line, for the lines of `raw` that hold hidden values."""
    if b"\x00" in raw[:8192]:
        return {}
    text = raw.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    spans = scan_text(text, name, rules)
    return {n: apply(lines[n - 1], found) for n, found in spans.items()}


def scan_files(
    rules: Rules, paths: list[str], read: Callable[[str], bytes | None]
) -> dict[str, Any]:
    """The program's output for `paths`, each read whole by `read` (None: too big to scan)."""
    files: dict[str, Any] = {}
    for path in paths:
        try:
            raw = read(path)
        except OSError as exc:
            files[path] = {"error": f"unreadable: {exc.strerror}"}
            continue
        if raw is None:
            files[path] = {"error": "too-big"}
            continue
        found = scan_bytes(raw, path, rules)
        lines = {
            str(n): text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            for n, text in found.items()
        }
        files[path] = {"lines": lines}
    return {"files": files}


def _read(path: str) -> bytes | None:
    if os.path.getsize(path) > MAX_SCAN_BYTES:
        return None
    with open(path, "rb") as fh:
        return fh.read()


def _main(argv: list[str]) -> int:
    sys.stdout.write(json.dumps(scan_files(Rules(json.loads(argv[0])), argv[1:], _read)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
