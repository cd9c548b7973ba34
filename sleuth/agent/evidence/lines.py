"""A call's output lines as a language model is shown them, and references to them.

```python
shown_conversation(messages)            # what a model is sent: outputs with `12| ` numbers
shown_output("grep", output)            # one successful output so (an MCP client's text)
span("12-14")                           # (12, 14)
cite("grep", output, 12, 14)            # those lines as recorded, or None
```

A language model sees each successful tool output with its lines numbered from 1 in a compact
gutter (`12| text`), except read_lines', whose lines already carry the file's own numbers
(`    12\ttext`). Evidence may cite lines by the numbers shown: file line numbers for
read_lines, the gutter's for every other tool (grep's too: its `path:N:` numbers are per file
and repeat across files, so they cannot name one output line). The transcript records each
output without the gutter and the gutter is added on the way to the model, so the numbers a
model saw are always those of the recorded output's lines (`str.splitlines`).
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.agent.history import NO_OUTPUT
from sleuth.transcripts.recording import REPORT_FINDING

SELF_NUMBERED = frozenset({"read_lines"})
"""Tools whose output shows the file's own line numbers, which references cite."""
MAX_LINES = 20
"""The most lines one reference may cite: a span a reader checks at a glance."""

_FILE_LINE = re.compile(r"^ *(\d+)\t")
_GUTTER = re.compile(r"^[ \t]*\d+\| ?", re.M)
_SPAN = re.compile(r"(?:lines?\s*)?L?(\d+)(?:\s*(?:-|–|—|\.\.|to)\s*L?(\d+))?", re.I)


def shown_numbers(tool: str, output: str) -> list[int | None]:
    """The number a model was shown beside each line of `output`: None beside read_lines'
    header and notes, which carry none."""
    lines = output.splitlines()
    if tool not in SELF_NUMBERED:
        return list(range(1, len(lines) + 1))
    return [int(m.group(1)) if (m := _FILE_LINE.match(line)) else None for line in lines]


def bare_line(line: str) -> str:
    """A line without the file line number read_lines shows at its start."""
    return _FILE_LINE.sub("", line, count=1)


def with_gutter(output: str) -> str:
    return "\n".join(
        f"{n}| {line}" if line else f"{n}|" for n, line in enumerate(output.splitlines(), 1)
    )


def shown_output(tool: str, output: str) -> str:
    """A successful call's output as a language model is shown it (by `sleuth ask` or over
    MCP): numbered in the gutter, except read_lines' (already numbered), report_finding's
    answers and the note that stands for an empty output."""
    if output == NO_OUTPUT or tool in (REPORT_FINDING, *SELF_NUMBERED):
        return output
    return with_gutter(output)


def strip_gutter(quote: str) -> str:
    """A quote without the `12| ` numbers a model may have copied with it."""
    return _GUTTER.sub("", quote)


def shown_conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a language model is sent it: each successful tool output numbered
    (read_lines' already is; report_finding's answers and failed calls' errors are not)."""
    tools: dict[str, str] = {}
    out = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, list):
            out.append(message)
            continue
        tools.update({b["id"]: b["name"] for b in content if b.get("type") == "tool_use"})
        out.append({**message, "content": [_numbered(b, tools) for b in content]})
    return out


def _numbered(block: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    tool = tools.get(block.get("tool_use_id", ""), "")
    content = block.get("content")
    if (
        block.get("type") != "tool_result"
        or block.get("is_error")
        or not isinstance(content, str)
        or not tool
    ):
        return block
    return {**block, "content": shown_output(tool, content)}


def span_text(raw: object) -> str:
    """A model's `lines` as "12" or "12-14": from "12-14", "L12–L14", "12 to 14", 12 or [12, 14].
    Raises ValueError for anything else."""
    if isinstance(raw, bool):
        raise ValueError("lines must be a line number or a range such as '12-14'")
    if isinstance(raw, int):
        raw = str(raw)
    elif isinstance(raw, list) and 1 <= len(raw) <= 2 and all(isinstance(n, int) for n in raw):
        raw = "-".join(map(str, raw))
    found = _SPAN.fullmatch(raw.strip()) if isinstance(raw, str) else None
    if found is None:
        raise ValueError("lines must be a line number or a range such as '12-14'")
    first, last = int(found.group(1)), int(found.group(2) or found.group(1))
    if last < first:
        raise ValueError(f"lines {first}-{last} run backwards; write {last}-{first}")
    return str(first) if first == last else f"{first}-{last}"


def span(text: str) -> tuple[int, int]:
    """The first and last line of a `span_text`."""
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def cite(tool: str, output: str, first: int, last: int) -> list[str] | None:
    """The recorded lines shown as `first`..`last`, or None unless every one of them was shown."""
    picked = {
        n: line
        for n, line in zip(shown_numbers(tool, output), output.splitlines(), strict=True)
        if n is not None and first <= n <= last
    }
    if len(picked) != last - first + 1:
        return None
    return [picked[n] for n in range(first, last + 1)]


def shown_range(tool: str, output: str) -> str:
    """The numbers a model was shown for this output, for telling it what it may cite."""
    numbers = [n for n in shown_numbers(tool, output) if n is not None]
    return f"lines {min(numbers)}-{max(numbers)}" if numbers else "no numbered lines"
