"""What a fleet call (`host="@GROUP"`) returns as data: the hosts grouped by what they answered.

A fleet call runs one tool on every host of a group. Its `ToolResult.data` is a `FleetResult`:
groups of hosts whose outputs are the same once the host's own details are masked (see
`SAME_MEANS`), the largest first, each other one with a diff against it; then the hosts
whose call failed and those that could not be reached, grouped by their (masked) error. Each
host's own raw result is recorded as its own `tool_executed` event, `fleet` naming the call.

It lives with the transcripts, which import no other room, so `sleuth show` can draw it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

FLEET_MARK = "@"
"""`host="@decode"` names the group `decode`: a fleet call."""

Verdict = Literal["all agree", "majority", "largest", "outlier", "failed", "unreachable"]
"""all agree: every host that answered answered the same. majority: the group more than half of
the answering hosts are in; largest: the biggest group when none has more than half; outlier:
any other group of answers. failed and unreachable group the hosts without an answer."""

SAME_MEANS = (
    "timestamps -> <time>",
    "PIDs -> pid <pid>",
    "each host's own name, SSH alias and address -> <host>",
    "each host's own roots (as configured and as resolved) -> <root>, <root2>, ...",
    "live load (GPU memory in use, utilisation) -> <load>",
    "the call's own cost (milliseconds, bytes over the wire) -> <cost>",
)
"""What two outputs may differ in and still count as the same. Everything else counts."""


def is_fleet_host(host: str) -> bool:
    return host.startswith(FLEET_MARK)


def part_id(call_id: str, host: str) -> str:
    """The id of one host's part of fleet call `call_id`, as its `tool_executed` records it."""
    return f"{call_id}{FLEET_MARK}{host}"


class FleetGroup(BaseModel):
    """Hosts that answered the same (or failed the same way)."""

    label: str
    """A, B, C... for answers; F1, F2... for failures; U1, U2... for unreachable hosts."""
    verdict: Verdict
    hosts: list[str]
    output: str = Field(description="The answer (or error) with the masked parts masked.")
    diff: str = Field("", description="An outlier's unified diff against the majority.")
    error_kind: str | None = None
    data: Any = Field(None, description="The first host's structured result, for programs.")


class FleetResult(BaseModel):
    """One fleet call's answer, grouped by agreement."""

    group: str
    """The group called, `@decode`."""
    tool: str
    hosts: list[str]
    """Every host of the group, in the group's order."""
    groups: list[FleetGroup]
    same_means: list[str] = Field(default_factory=lambda: list(SAME_MEANS))

    def answers(self) -> list[FleetGroup]:
        return [g for g in self.groups if g.verdict not in ("failed", "unreachable")]

    def verdict_of(self, *verdicts: Verdict) -> list[FleetGroup]:
        return [g for g in self.groups if g.verdict in verdicts]

    def hosts_of(self, *verdicts: Verdict) -> list[str]:
        return [h for g in self.verdict_of(*verdicts) for h in g.hosts]
