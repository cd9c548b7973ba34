"""Transcript store speed: appending 200 fsynced events, and loading + verifying 200 events.

    python benchmarks/transcripts.py [--out benchmarks/results/transcripts.md]

The issue's target is a 200-event replay under 0.5 s, so load + verify must be
a small part of that. Redaction of a 64 KB tool output is timed too.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sleuth.transcripts.events import (
    ContentBlock,
    ModelResponse,
    ModelTurn,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.redact import redact
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter, load
from sleuth.transcripts.verify import verify

EVENTS = 200
OUTPUT = "\n".join(f"model.layers.{i}.mlp.gate_proj.weight BF16 [7168, 18432]" for i in range(40))


def _events() -> list[object]:
    events: list[object] = [
        SessionStarted(session_id="bench", question="q", hosts=[], brain="replay")
    ]
    for i in range(1, EVENTS):
        if i % 2:
            block = ContentBlock(type="tool_use", id=f"c{i}", name="read_lines", input={"p": i})
            events.append(
                ModelTurn(
                    turn=i,
                    request_messages=i,
                    request_hash="0" * 64,
                    response=ModelResponse(
                        content=[ContentBlock(type="text", text="x" * 300), block]
                    ),
                )
            )
        else:
            events.append(
                ToolExecuted(
                    call_id=f"c{i - 1}",
                    tool="read_lines",
                    input={},
                    result=ToolResult(ok=True, output=OUTPUT),
                )
            )
    return events


def _time(action: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    events = _events()
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        paths: list[Path] = []

        def write() -> None:
            with TranscriptWriter.create(Path(tmp), f"b{len(paths)}") as writer:
                for event in events:
                    writer.append(event)  # type: ignore[arg-type]
            paths.append(writer.path)

        append = _time(write, args.repeats)
        size = paths[0].stat().st_size
        loading = _time(lambda: load(paths[0]), args.repeats * 4)
        verifying = _time(lambda: verify(paths[0]), args.repeats * 4)
        both = _time(lambda: (load(paths[0]), verify(paths[0])), args.repeats * 4)
    big = (OUTPUT + "\n") * (65536 // (len(OUTPUT) + 1) + 1)
    big = big[:65536]
    redacting = _time(lambda: redact(big), 50)
    rows = [
        ("append 200 events (redact + hash + write + fsync each)", append, "per file"),
        ("load 200 events (parse + validate)", loading, ""),
        ("verify 200 events (schema + seq + chain + hash)", verifying, ""),
        ("load + verify 200 events", both, "target: small part of 0.5 s replay"),
        ("redact one 64 KB tool output", redacting, "target: well under 10 ms"),
    ]
    lines = [
        "## Transcripts",
        "",
        f"`python benchmarks/transcripts.py`: {EVENTS} events (half model turns, half tool results"
        f" of {len(OUTPUT)} bytes), file {size / 1024:.0f} KiB, on this machine's disk"
        " (fsync per event). Median (min) of repeats.",
        "",
        "| operation | median | min | note |",
        "|---|---|---|---|",
    ]
    for name, times, note in rows:
        lines.append(
            f"| {name} | {statistics.median(times) * 1000:.1f} ms | {min(times) * 1000:.1f} ms"
            f" | {note} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
