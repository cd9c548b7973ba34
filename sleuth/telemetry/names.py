"""Which names a span may carry when content is not exported: a tool registered in this
Sleuth, and a host or group the session was configured with. A model chooses the names it
calls, so a tool it made up or a host string it wrote can spell out what it read; such a name
is content, and leaves only with `--otel-content`."""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.transcripts.events import SessionStarted
from sleuth.transcripts.recording import REPORT_FINDING


@dataclass(frozen=True)
class Names:
    """The names that may leave for one session."""

    tools: frozenset[str]
    hosts: frozenset[str]

    @classmethod
    def of(cls, start: SessionStarted, tools: frozenset[str]) -> Names:
        """`tools`: the registry's names, from the command that exports (telemetry imports no
        tools), and report_finding, which the call path answers itself; the hosts and groups:
        the ones the session recorded as configured."""
        hosts = {h.name for h in start.hosts} | {f"@{g}" for g in start.groups}
        hosts |= {member for members in start.groups.values() for member in members}
        return cls(tools | {REPORT_FINDING}, frozenset(hosts))
