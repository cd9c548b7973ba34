"""Re-driving a recording: `run.replay` checks it, `resume.resume_investigation` continues it.

- `recorded`: the transcript read once (verified, parsed, split into turns), handed along.
- `cursor`: the turn a replay is on and the recorded results still due.
- `brains`: the recorded turns as a brain, or another brain held to them.
- `executors`: tool calls answered from the recording or run live, and the in-memory writer.
- `compare`: divergence, drift, diffs and the quote recheck; the `ReplayResult` verdict.
"""
