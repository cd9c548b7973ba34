"""A fleet call as every format draws it: a table of its groups (hosts, count, verdict, diff
excerpt), one row per group of hosts that answered alike, failed alike or could not be
reached; each host's own raw output is in its own recorded part."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from sleuth.transcripts.events import Evidence, ToolExecuted
from sleuth.transcripts.fleet import FleetGroup, FleetResult, is_fleet_host
from sleuth.transcripts.hostlist import compress

EXCERPT_LINES = 4
EXCERPT_CHARS = 300
COLUMNS = ("group", "verdict", "hosts", "count", "diff excerpt")


@dataclass(frozen=True)
class FleetRow:
    label: str
    verdict: str
    hosts: str
    count: int
    excerpt: str

    def cells(self) -> tuple[str, str, str, str, str]:
        return (self.label, self.verdict, self.hosts, str(self.count), self.excerpt)


def fleet_of(call: ToolExecuted) -> FleetResult | None:
    """The grouped result of a fleet call's own event; None for any other event."""
    if call.fleet is not None or not is_fleet_host(call.host):
        return None
    try:
        return FleetResult.model_validate(call.result.data)
    except ValidationError:
        return None


def fleet_rows(fleet: FleetResult) -> list[FleetRow]:
    return [
        FleetRow(g.label, g.verdict, compress(g.hosts), len(g.hosts), excerpt(g))
        for g in fleet.groups
    ]


def excerpt(group: FleetGroup) -> str:
    """What sets a group apart: an outlier's changed lines, a failure's error; the majority
    is the reference the others are compared with."""
    if group.verdict == "outlier":
        lines = [
            line
            for line in group.diff.splitlines()
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
        ]
    elif group.verdict in ("failed", "unreachable"):
        lines = group.output.splitlines()[:1]
    else:
        return "(reference)"
    text = "\n".join(lines[:EXCERPT_LINES])
    more = len(lines) - EXCERPT_LINES
    text = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"
    return text + (f"\n… {more} more changed lines" if more > 0 else "")


def summary(fleet: FleetResult, parts: int) -> str:
    """One line under the table: how many hosts, and where their raw outputs are."""
    masked = ", ".join(rule.split(" -> ")[0] for rule in fleet.same_means)
    return (
        f"{len(fleet.hosts)} hosts of {fleet.group}, {parts} raw per-host results recorded; "
        f"the same = equal once these are masked: {masked}"
    )


def hosts_note(evidence: Evidence) -> str:
    """`[gpu-[01-04]] ` before a quote of named hosts' outputs; "" for an ordinary quote."""
    return f"[{', '.join(evidence.hosts)}] " if evidence.hosts else ""
