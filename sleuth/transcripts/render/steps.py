"""The one walk over a story's steps: each step is handed to a format's `Teller`, so every
format tells the same steps in the same order and only the markup differs.

```python
told = tell(build_story(events), teller)   # one result per step; None for a step no format shows
```
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from sleuth.transcripts.events import (
    ApprovalEvent,
    BudgetNotice,
    ErrorEvent,
    Finding,
    FindingEvent,
    ModelTurn,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.render.phrases import segment_line
from sleuth.transcripts.render.story import Story

T = TypeVar("T", covariant=True)


class Teller(Protocol[T]):
    """How one format tells each kind of step."""

    def turn(self, number: int, text: str) -> T:
        """A model turn; `text` is its reasoning, "" when it only called tools."""
        ...

    def call(self, call: ToolExecuted) -> T: ...

    def finding(self, finding: Finding) -> T: ...

    def approval(self, tool: str, host: str, outcome: str) -> T:
        """`outcome`: `approved by alice: the reason` (or `denied by ...`)."""
        ...

    def error(self, where: str, message: str) -> T: ...

    def budget(self, reason: str) -> T: ...

    def segment(self, line: str) -> T:
        """A resume's start: `resumed here (segment 2) from ... · session ...`."""
        ...


def tell(story: Story, teller: Teller[T]) -> list[T | None]:
    """Each step as `teller` tells it, in order; None for a step no format shows."""
    return [_tell_step(story, step, teller) for step in story.steps]


def _tell_step(story: Story, step: object, teller: Teller[T]) -> T | None:
    """None for a kind of step no format shows (a signature, a repair)."""
    if isinstance(step, ModelTurn):
        return teller.turn(step.turn, _reasoning(step))
    if isinstance(step, ToolExecuted):
        return teller.call(step)
    if isinstance(step, FindingEvent):
        return teller.finding(step.finding)
    if isinstance(step, ApprovalEvent):
        verdict = "approved" if step.approved else "denied"
        why = f": {step.reason}" if step.reason else ""
        return teller.approval(step.tool, step.host, f"{verdict} by {step.by}{why}")
    if isinstance(step, ErrorEvent):
        return teller.error(step.where, step.message)
    if isinstance(step, BudgetNotice):
        return teller.budget(step.reason)
    if isinstance(step, SessionStarted):
        return teller.segment(segment_line(step, story.segment(step)))
    return None


def _reasoning(turn: ModelTurn) -> str:
    return "\n\n".join(
        block.text for block in turn.response.content if block.type == "text" and block.text
    )
