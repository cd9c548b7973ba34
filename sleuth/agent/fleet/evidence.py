"""Evidence of a fleet call, checked host by host: a quote (or lines) that names `hosts` must
hold in each of those hosts' own outputs, not merely somewhere in the grouped result.

```python
check = check_hosts(evidence, lambda part: grounder.calls.get(part), check_one)
```

The grounding check (`agent/findings.py`) hands over how it finds a call and how it checks
one piece against one call, so the rules stay its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from sleuth.transcripts.events import EvidenceCheck, Refusal
from sleuth.transcripts.fleet import part_id
from sleuth.transcripts.hostlist import expand

if TYPE_CHECKING:
    from sleuth.agent.findings import CallRecord


class Named(Protocol):
    @property
    def call_id(self) -> str: ...
    @property
    def quote(self) -> str: ...
    @property
    def hosts(self) -> list[str]: ...


R = TypeVar("R", bound="CallRecord")


def check_hosts(
    evidence: Named,
    find: Callable[[str], R | None],
    check: Callable[[R], EvidenceCheck],
) -> EvidenceCheck:
    """`evidence` against each named host's own part of its fleet call: the first host it
    fails for, else the last check; `unknown_host` for a host the call did not reach."""
    named = {"call_id": evidence.call_id, "hosts": evidence.hosts}
    try:
        hosts, why = expand(evidence.hosts), ""
    except ValueError as exc:
        hosts, why = [], f"hosts {evidence.hosts!r}: {exc}"
    verdict: EvidenceCheck | None = None
    for host in hosts:
        part = find(part_id(evidence.call_id, host))
        if part is None:
            why = (
                f"call {evidence.call_id} has no output of host {host!r}: name `hosts` only for "
                "a call on a host group (host='@NAME'), and only hosts of that group"
            )
            break
        verdict = check(part)
        if not verdict.grounded:
            return verdict.model_copy(update={**named, "why": f"host {host}: {verdict.why}"})
    if why or verdict is None:
        return EvidenceCheck(
            **named,
            quote=evidence.quote,
            grounded=False,
            failure=Refusal.UNKNOWN_HOST,
            why=why or "`hosts` names no host",
        )
    return verdict.model_copy(update=named)
