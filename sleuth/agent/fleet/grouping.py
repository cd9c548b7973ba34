"""Hosts grouped by what they answered, and the grouped result as the model reads it.

```python
groups = Grouping("@decode", "python_env", members)
groups.add("gpu-01", result, masked_output)     # as each host answers, in any order
fleet = groups.result()                          # a FleetResult: majority, outliers, failures
text = fleet_text(fleet)                         # one result however many hosts agree
```

Only one copy of each distinct (masked) answer is kept, with the hosts that gave it: the raw
outputs go to the transcript, one `tool_executed` per host, as they arrive.
"""

from __future__ import annotations

import difflib
import string
from dataclasses import dataclass, field
from typing import Any

from sleuth.errors import ErrorKind
from sleuth.transcripts.fleet import FleetGroup, FleetResult, Verdict
from sleuth.transcripts.hostlist import compress
from sleuth.transcripts.results import ToolResult

DIFF_LINES = 40
DIFF_CHARS = 4000
SHOWN_GROUPS = 12
"""Groups whose output or diff the model is shown; the rest are listed by their hosts."""


@dataclass
class _Kept:
    text: str
    hosts: list[str] = field(default_factory=list)
    data: Any = None
    data_from: int = -1
    error_kind: str | None = None


class Grouping:
    """Collects one fleet call's answers as they arrive; thread-compatible (one collector)."""

    def __init__(self, group: str, tool: str, members: list[str]) -> None:
        self.group, self.tool, self.members = group, tool, members
        self._order = {host: i for i, host in enumerate(members)}
        self._answers: dict[str, _Kept] = {}
        self._failures: dict[tuple[str, str], _Kept] = {}

    def add(self, host: str, result: ToolResult, masked: str) -> None:
        """One host's (redacted) result; `masked` is its output, or its error, masked."""
        if result.ok:
            kept = self._answers.setdefault(masked, _Kept(masked))
        else:
            kind = result.error_kind or ErrorKind.FAILED
            kept = self._failures.setdefault((kind, masked), _Kept(masked, error_kind=kind))
        kept.hosts.append(host)
        rank = self._order.get(host, len(self._order))
        # The data shown is the first member's, whichever host answered first.
        if result.ok and (kept.data_from < 0 or rank < kept.data_from):
            kept.data, kept.data_from = result.data, rank

    def result(self) -> FleetResult:
        answers = sorted(self._answers.values(), key=lambda k: (-len(k.hosts), self._first(k)))
        answered = sum(len(k.hosts) for k in answers)
        groups = [
            self._group(_label(i), _verdict(i, k, len(answers), answered), k, answers[0])
            for i, k in enumerate(answers)
        ]
        failures = sorted(self._failures.values(), key=lambda k: (-len(k.hosts), self._first(k)))
        counts = {"failed": 0, "unreachable": 0}
        for kept in failures:
            verdict: Verdict = "unreachable" if kept.error_kind == "unreachable" else "failed"
            counts[verdict] += 1
            label = f"{'U' if verdict == 'unreachable' else 'F'}{counts[verdict]}"
            groups.append(self._group(label, verdict, kept, None))
        return FleetResult(group=self.group, tool=self.tool, hosts=self.members, groups=groups)

    def _first(self, kept: _Kept) -> int:
        return min(self._order.get(h, len(self._order)) for h in kept.hosts)

    def _group(self, label: str, verdict: Verdict, kept: _Kept, base: _Kept | None) -> FleetGroup:
        hosts = sorted(kept.hosts, key=lambda h: self._order.get(h, len(self._order)))
        diff = ""
        if verdict == "outlier" and base is not None:
            diff = capped_diff(base.text, kept.text, _label(0), label)
        return FleetGroup(
            label=label,
            verdict=verdict,
            hosts=hosts,
            output=kept.text,
            diff=diff,
            error_kind=kept.error_kind,
            data=kept.data,
        )


def _verdict(index: int, kept: _Kept, groups: int, answered: int) -> Verdict:
    if groups == 1:
        return "all agree"
    if index:
        return "outlier"
    return "majority" if 2 * len(kept.hosts) > answered else "largest"


def _label(index: int) -> str:
    letters = string.ascii_uppercase
    return letters[index] if index < len(letters) else f"{letters[index // 26 - 1]}{index % 26}"


def capped_diff(before: str, after: str, a: str, b: str) -> str:
    """A unified diff with one line of context, capped: enough to see what differs."""
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), fromfile=a, tofile=b, lineterm="", n=1
        )
    )
    text = "\n".join(lines[:DIFF_LINES])
    if len(text) > DIFF_CHARS:
        text = text[:DIFF_CHARS] + "..."
    extra = len(lines) - DIFF_LINES
    return text + (f"\n[diff cut: {extra} more lines]" if extra > 0 else "")


def fleet_text(fleet: FleetResult) -> str:
    """The grouped result as the model reads it: the largest group's output once, each other
    group as a diff against it, then the hosts without an answer and their errors."""
    answers = fleet.answers()
    lost = len(fleet.hosts) - sum(len(g.hosts) for g in fleet.groups)
    head = [
        f"{fleet.tool} on {fleet.group}: {len(fleet.hosts)} hosts; "
        + _counts(fleet, len(answers))
        + (f"; {lost} not reported" if lost else ""),
        "Outputs count as the same when they are equal once these are masked: "
        + "; ".join(fleet.same_means)
        + ". Each host's raw output is recorded.",
        "To quote hosts' own outputs, give report_finding evidence `hosts` (names, or ranges "
        "as shown); each quote is checked against each named host's own output.",
    ]
    body: list[str] = []
    for i, g in enumerate(fleet.groups):
        title = f"[{g.label}] {g.verdict}: {_hosts(g.hosts)}"
        if i >= SHOWN_GROUPS:
            body.append(title + " (not shown: narrow the group to see it)")
        elif g.verdict == "outlier":
            body.append(f"{title}; differs from [{answers[0].label}]:\n{g.diff}")
        else:
            body.append(f"{title}\n{g.output.rstrip() or '(no output)'}")
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def _counts(fleet: FleetResult, kinds: int) -> str:
    answered = sum(len(g.hosts) for g in fleet.answers())
    parts = [
        f"{answered} answered in {kinds} kind{'' if kinds == 1 else 's'} of output"
        if answered
        else "none answered"
    ]
    for verdict in ("failed", "unreachable"):
        hosts = fleet.hosts_of(verdict)
        if hosts:
            parts.append(f"{len(hosts)} {verdict}")
    return ", ".join(parts)


def _hosts(hosts: list[str]) -> str:
    return f"{len(hosts)} host{'' if len(hosts) == 1 else 's'}: {compress(hosts)}"
