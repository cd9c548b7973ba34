"""The brains a replay drives the loop with: the recorded turns, or a brain checked against them.

```python
brain = ReplayBrain(recording, cursor)                  # the recorded replies, in order
brain = CheckedBrain(PlaybookBrain(), recording, cursor)  # a playbook's, held to the recording
```
"""

from __future__ import annotations

from sleuth.agent.protocols import Brain, BrainReply, Request
from sleuth.agent.replay.compare import Diverged, Divergence, check_calls
from sleuth.agent.replay.cursor import Cursor
from sleuth.transcripts.recording import Recording


class ReplayBrain:
    """Feeds the recording's model turns back in order, checking the conversation keeps pace."""

    name = "replay"

    def __init__(self, recording: Recording, cursor: Cursor) -> None:
        self.model = recording.start.model
        self._recording = recording
        self._cursor = cursor

    def complete(self, request: Request) -> BrainReply:
        turn = self._cursor.advance(self._recording)
        expected = turn.event.request_messages
        if len(request.messages) != expected:
            raise Diverged(
                Divergence(
                    kind="conversation",
                    step=turn.event.turn,
                    expected=expected,
                    actual=len(request.messages),
                    message=f"the conversation has {len(request.messages)} messages where the "
                    f"recording sent {expected}",
                )
            )
        return BrainReply(
            response=turn.event.response.model_copy(deep=True),
            usage=turn.event.usage,
            request_hash=turn.event.request_hash,
        )


class CheckedBrain:
    """Asks another brain (a playbook, say) and stops at the first call that differs from the
    recording: a different tool, input, id or order."""

    def __init__(self, inner: Brain, recording: Recording, cursor: Cursor) -> None:
        self.inner, self._recording, self._cursor = inner, recording, cursor
        self.name, self.model = inner.name, inner.model

    def complete(self, request: Request) -> BrainReply:
        turn = self._cursor.advance(self._recording)
        reply = self.inner.complete(request)
        blocks = reply.response.content
        actual = [(b.id or "", b.name or "", b.input or {}) for b in blocks if b.type == "tool_use"]
        check_calls(turn.event.turn, turn.calls, actual)
        return reply
