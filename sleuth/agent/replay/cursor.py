"""Where a replay stands in its recording: the turn the loop is on and the results still due.

```python
cursor = Cursor()
turn = cursor.advance(recording)              # the next recorded model turn
recorded = cursor.take("read_lines", raw)     # that turn's recorded result for this call
```

The replay brains advance it and the executors take from it, so a call is answered only
from the turn that made it, whatever order the loop's threads ask in.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Any

from sleuth.agent.loop import Stop
from sleuth.agent.replay.compare import Diverged, Divergence
from sleuth.transcripts.events import SessionStatus, ToolExecuted
from sleuth.transcripts.recording import Recording, Turn
from sleuth.transcripts.store import canonical_json


class RecordingEnded(Stop):
    """The recording stops here (a session that crashed): the replay ends with it."""

    status: SessionStatus = "interrupted"


class Cursor:
    """Which recorded turn the loop is on, and its recorded results still to hand out."""

    def __init__(self) -> None:
        self.index = 0
        self.turn: Turn | None = None
        self._pending: dict[tuple[str, str], deque[ToolExecuted]] = {}
        self._lock = threading.Lock()

    @property
    def step(self) -> int:
        """The model turn (1-based) in progress, or the call of a session without turns; 0
        before the first."""
        return self.turn.event.turn if self.turn else self.index

    def advance(self, recording: Recording) -> Turn:
        if self.index >= len(recording.turns):
            if recording.status is None:
                raise RecordingEnded("the recording ends here: the session never finished")
            raise Diverged(
                Divergence(
                    kind="turns",
                    step=self.index + 1,
                    expected=len(recording.turns),
                    actual=self.index + 1,
                    message=f"the loop asked for turn {self.index + 1}, but the recording "
                    f"ended after {len(recording.turns)} turns",
                )
            )
        self.turn = recording.turns[self.index]
        self.index += 1
        pending: dict[tuple[str, str], deque[ToolExecuted]] = defaultdict(deque)
        for call_id, name, raw in self.turn.calls:
            if call_id in self.turn.results:
                pending[(name, canonical_json(raw))].append(self.turn.results[call_id])
        self._pending = dict(pending)
        return self.turn

    def hold(self, call: ToolExecuted, step: int) -> None:
        """A session without model turns: its calls come one at a time, each its own step."""
        self.turn, self.index = None, step
        self._pending = {(call.tool, canonical_json(call.input)): deque([call])}

    def take(self, name: str, raw: dict[str, Any]) -> ToolExecuted:
        step = self.step
        with self._lock:
            queue = self._pending.get((name, canonical_json(raw)))
            if queue:
                return queue.popleft()
        raise Diverged(
            Divergence(
                kind="calls",
                step=step,
                tool=name,
                actual=raw,
                message=f"{name} was called with an input the recording has no result for",
            )
        )
