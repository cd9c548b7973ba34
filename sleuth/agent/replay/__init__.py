"""Re-driving a recording: `run.replay` checks it, `resume.resume_investigation` continues it.

- `recorded`: the transcript read once (verified, parsed, split into turns), handed along.
- `cursor`: the turn a replay is on and the recorded results still due.
- `brains`: the recorded turns as a brain, or another brain held to them.
- `executors`: what the call pipeline is given: results and consent answered from the
  recording, or calls run live and compared; and the in-memory writer.
- `calls_only`: a session without model turns (`sleuth tool`, `sleuth mcp`) replays its
  recorded calls in order.
- `compare`: divergence, drift, diffs and the quote recheck; the `ReplayResult` verdict.
- `result`: the `ReplayResult` both replays end with, their run held against the recording.
"""
