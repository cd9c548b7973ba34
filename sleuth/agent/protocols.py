"""The agent's protocols: a Brain answers a Request; an Observer watches the run.

The conversation is kept in the Messages API's shape (a list of
`{"role": ..., "content": [blocks]}` dicts); a brain for another API maps it
on the way out and maps its answer back into `ModelResponse` blocks.

```python
class EchoBrain:
    name, model = "echo", None
    def complete(self, request: Request) -> BrainReply:
        return BrainReply(response=ModelResponse(content=[ContentBlock(type="text", text="hi")]))
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from sleuth.transcripts.events import HostInfo, ModelResponse, Retry, ToolSpec, Usage

Message = dict[str, Any]
UNPARSED = "unparsed_arguments"
"""A tool call's input when the model's arguments were not a JSON object: `{UNPARSED: raw}`,
kept as sent so the call can be answered with what was wrong."""


@dataclass
class Request:
    """What a brain sees for one turn."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    final: bool = False
    """The budget is spent: this is the last turn, and only report_finding will be run."""
    on_retry: Callable[[Retry], None] = field(default=lambda retry: None)
    """Called as each retry happens, so the view can show it before the turn ends."""
    tool_data: dict[str, Any] = field(default_factory=dict)
    """Each earlier call's structured result (ToolResult.data) by call id, for scripted brains."""
    question: str = ""
    """The question as the user asked it: data, so no brain parses the opening prose."""
    hosts: list[HostInfo] = field(default_factory=list)
    """The hosts the run may use, with their roots and allowed tools."""
    groups: dict[str, list[str]] = field(default_factory=dict)
    """The host groups a fleet call (`host="@NAME"`) may name, with their members."""
    more_room: bool = False
    """The previous reply was cut off at its output-token limit: allow this one more (once)."""
    deadline: float | None = None
    """time.monotonic() at which the wall-time budget is spent; retries stop before it."""
    max_output: int | None = None
    """Output tokens the budget has left; a raised limit (more_room) never goes past it."""


class BrainReply(BaseModel):
    response: ModelResponse
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    retries: list[Retry] = Field(default_factory=list)
    request_hash: str = ""
    """sha256 of the exact request body sent; empty for brains that send none."""


BrainErrorKind = Literal["usage", "provider", "context", "protocol"]


class BrainError(Exception):
    """The brain could not produce a turn, even after retries; the message says why and what to
    do. `kind`: usage (the configuration cannot work: exit 2 before any request), provider (the
    server failed or refused the request), context (the conversation no longer fits the model's
    context window), protocol (the answer was not a model response)."""

    def __init__(self, message: str, kind: BrainErrorKind = "provider") -> None:
        super().__init__(message)
        self.kind: BrainErrorKind = kind


class Brain(Protocol):
    @property
    def name(self) -> str:
        """anthropic, openai, replay or playbook: recorded in the transcript."""
        ...

    @property
    def model(self) -> str | None: ...

    def complete(self, request: Request) -> BrainReply: ...


class Observer(Protocol):
    """Hears each step as it happens (the live view); every method must be cheap. A method an
    observer does not define does nothing, so `Quiet` is this protocol and no more."""

    def turn_started(self, turn: int) -> None:
        return None

    def turn_ended(self, turn: int, reply: BrainReply, cost_usd: float) -> None:
        return None

    def retry(self, retry: Retry) -> None:
        return None

    def tool_started(self, call_id: str, tool: str, host: str, summary: str) -> None:
        return None

    def tool_ended(self, call_id: str, ok: bool, duration_s: float) -> None:
        return None

    def note(self, text: str) -> None:
        return None


class Quiet(Observer):
    """An Observer that shows nothing: for tests and --json runs."""

    def __enter__(self) -> Quiet:  # a context manager like the live view, so callers need
        return self  # not tell the two apart

    def __exit__(self, *exc: object) -> None: ...
