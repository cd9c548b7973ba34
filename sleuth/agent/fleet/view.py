"""The groups and hosts a session's fleet calls may reach, as its session_started records them.

```python
view = FleetView.of(start)          # live and in replay alike: the recorded groups and hosts
view.members("decode")              # ("gpu-d1", "gpu-d2", ...)
```

Live runs and replays both build it from the recorded `session_started`, so a replay groups a
fleet call's recorded answers with exactly the members and masks the run used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from sleuth.config import Limits
from sleuth.errors import ErrorKind, ToolError
from sleuth.transcripts.events import HostInfo, SessionStarted


@dataclass(frozen=True)
class FleetPart:
    """What makes a call one host's part of a fleet call."""

    call_id: str
    """The fleet call's id."""
    group: str


@dataclass(frozen=True)
class FleetView:
    groups: Mapping[str, tuple[str, ...]]
    hosts: Mapping[str, HostInfo]
    limits: Limits = field(default_factory=Limits)
    """The caps of the grouped result: the recorded ones, so a replay cuts it the same."""

    @classmethod
    def of(cls, start: SessionStarted) -> FleetView:
        try:
            limits = Limits.model_validate(start.policy.get("limits") or {})
        except ValidationError:
            limits = Limits()
        return cls(
            {name: tuple(members) for name, members in start.groups.items()},
            {h.name: h for h in start.hosts},
            limits,
        )

    def members(self, group: str) -> tuple[str, ...]:
        """The group's hosts; a ToolError naming the groups there are when it is unknown."""
        members = self.groups.get(group)
        if members:
            return members
        known = ", ".join(f"@{name} ({len(m)} hosts)" for name, m in self.groups.items() if m)
        raise ToolError(
            f"unknown host group @{group}; groups of this session: {known or 'none'}. Define it "
            f'under [groups] in sleuth.toml (e.g. {group} = ["gpu-*"]) and pass --hosts {group}',
            ErrorKind.UNKNOWN_HOST,
        )
