"""Traces of real traffic: read them (one reader per format), retime them, and make them.

```python
trace = read_trace(Path("mooncake.jsonl").read_bytes(), "mooncake.jsonl")
rows = replay_rows(trace.requests, speed=2.0, max_requests=500)   # what the load generator gets
shared = shared_prefix_trace(systems=4, questions=8, system_len=1024, question_len=64)
```

Formats:
- Mooncake JSONL: one object per line with `timestamp` (ms), `input_length`,
  `output_length` and `hash_ids`, each id naming one `block_size`-token block of the
  prompt (512 in Mooncake's traces): requests whose ids agree in their first k places share
  their first k blocks, which is what a server's prefix cache can reuse.
- CSV with a header naming `timestamp` (ms), `input` and `output` columns (also
  `input_length`/`output_length` or `input_tokens`/`output_tokens`); no shared prefixes.

The load generator builds each block's text from its hash id alone, so the same ids in
the same order become the same prompt prefix.
"""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.errors import ErrorKind, ToolError

BLOCK_SIZE = 512
"""Tokens per hash id in Mooncake's traces."""
MAX_TRACE_BYTES = 64 << 20
CSV_COLUMNS = {
    "timestamp": ("timestamp", "timestamp_ms", "time_ms"),
    "input": ("input", "input_length", "input_tokens"),
    "output": ("output", "output_length", "output_tokens"),
}


class TraceRequest(BaseModel):
    timestamp_ms: float = Field(description="Arrival time in milliseconds (any origin).")
    input_length: int = Field(ge=1, le=1 << 20)
    output_length: int = Field(ge=1, le=1 << 20)
    hash_ids: list[int] = Field(default_factory=list)


class Trace(BaseModel):
    source: str
    format: Literal["mooncake", "csv"]
    requests: list[TraceRequest]


def read_trace(data: bytes, source: str) -> Trace:
    """A Mooncake JSONL or a CSV trace, told apart by its first non-blank character."""
    if len(data) > MAX_TRACE_BYTES:
        raise _error(
            source, 0, f"is {len(data):,} bytes; traces up to {MAX_TRACE_BYTES:,} are read"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _error(source, 0, "is not UTF-8 text") from None
    first = text.lstrip()[:1]
    if not first:
        raise _error(source, 0, "holds no requests")
    if first == "{":
        requests, kind = read_mooncake(text, source), "mooncake"
    else:
        requests, kind = read_csv(text, source), "csv"
    if not requests:
        raise _error(source, 0, "holds no requests")
    requests.sort(key=lambda r: r.timestamp_ms)
    return Trace(source=source, format=kind, requests=requests)


def read_mooncake(text: str, source: str) -> list[TraceRequest]:
    """Mooncake's JSONL: timestamp (ms), input_length, output_length, hash_ids."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise _error(source, number, f"is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise _error(source, number, "is not a JSON object")
        out.append(
            _row(
                source,
                number,
                obj.get("timestamp"),
                obj.get("input_length"),
                obj.get("output_length"),
                obj.get("hash_ids", []),
            )
        )
    return out


def read_csv(text: str, source: str) -> list[TraceRequest]:
    """A CSV with a header row naming the timestamp (ms), input and output columns."""
    reader = csv.reader(io.StringIO(text))
    header = [h.strip().lower() for h in next(reader, [])]
    where = {}
    for key, names in CSV_COLUMNS.items():
        found = [i for i, h in enumerate(header) if h in names]
        if not found:
            raise _error(source, 1, f"has no {key} column; the header must name {', '.join(names)}")
        where[key] = found[0]
    out = []
    for number, cells in enumerate(reader, 2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise _error(source, number, f"has {len(cells)} cells, the header {len(header)}")
        values = {k: _number(source, number, cells[i]) for k, i in where.items()}
        out.append(_row(source, number, values["timestamp"], values["input"], values["output"], []))
    return out


def replay_rows(
    requests: list[TraceRequest],
    *,
    speed: float = 1.0,
    max_requests: int | None = None,
    max_duration_s: float | None = None,
) -> list[list[Any]]:
    """The rows the load generator replays: [seconds from the first request, scaled by
    1/speed, input length, output length, hash ids], cut to the caps."""
    if speed <= 0:
        raise ToolError(f"speed must be above 0, not {speed:g}", ErrorKind.INVALID_INPUT)
    start = requests[0].timestamp_ms if requests else 0.0
    rows = []
    for r in requests[:max_requests]:
        t = (r.timestamp_ms - start) / 1000.0 / speed
        if max_duration_s is not None and t >= max_duration_s:
            break
        rows.append([round(t, 6), r.input_length, r.output_length, r.hash_ids])
    return rows


def shared_prefix_trace(
    *,
    systems: int,
    questions: int,
    system_len: int,
    question_len: int,
    output_len: int = 64,
    interval_ms: float = 0.0,
    block_size: int = BLOCK_SIZE,
    seed: int = 0,
) -> list[TraceRequest]:
    """N system prompts x M questions as a Mooncake trace: each request's hash ids are its
    system prompt's blocks (shared by its M questions) then its question's own blocks. A
    system prompt fills whole blocks (system_len rounded up to a multiple of block_size),
    so a question never shares a block with it. `systems=N*M, questions=1` is the same
    load with nothing shared. Requests come in a seeded shuffle, `interval_ms` apart."""
    sys_blocks = -(-system_len // block_size)
    q_blocks = -(-question_len // block_size)
    next_id = systems * sys_blocks
    pairs = [(s, q) for s in range(systems) for q in range(questions)]
    random.Random(seed).shuffle(pairs)
    out = []
    for k, (s, _) in enumerate(pairs):
        ids = [s * sys_blocks + j for j in range(sys_blocks)]
        ids += list(range(next_id, next_id + q_blocks))
        next_id += q_blocks
        out.append(
            TraceRequest(
                timestamp_ms=k * interval_ms,
                input_length=sys_blocks * block_size + question_len,
                output_length=output_len,
                hash_ids=ids,
            )
        )
    return out


def to_mooncake(requests: list[TraceRequest]) -> str:
    """The Mooncake JSONL text of `requests`."""
    return "".join(
        json.dumps(
            {
                "timestamp": r.timestamp_ms,
                "input_length": r.input_length,
                "output_length": r.output_length,
                "hash_ids": r.hash_ids,
            },
            separators=(",", ":"),
        )
        + "\n"
        for r in requests
    )


def parse_speed(text: str) -> float:
    """`2x`, `2`, `0.5x` -> the factor the trace's clock runs faster by."""
    try:
        value = float(text.strip().lower().removesuffix("x"))
    except ValueError:
        raise ToolError(
            f"--speed {text!r}: give a factor such as 2x or 0.5x", ErrorKind.INVALID_INPUT
        ) from None
    if value <= 0:
        raise ToolError(f"--speed {text!r} must be above 0", ErrorKind.INVALID_INPUT)
    return value


def _row(
    source: str, number: int, ts: object, n_in: object, n_out: object, ids: object
) -> TraceRequest:
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise _error(source, number, "needs a numeric timestamp (milliseconds)")
    for name, value in (("input_length", n_in), ("output_length", n_out)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1 << 20:
            raise _error(source, number, f"needs {name} as an integer from 1 to {1 << 20}")
    if not isinstance(ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in ids
    ):
        raise _error(source, number, "needs hash_ids as a list of integers")
    return TraceRequest(timestamp_ms=ts, input_length=n_in, output_length=n_out, hash_ids=ids)


def _number(source: str, number: int, cell: str) -> int | float:
    try:
        value = float(cell)
    except ValueError:
        raise _error(source, number, f"has {cell.strip()!r} where a number belongs") from None
    return int(value) if value.is_integer() else value


def _error(source: str, number: int, what: str) -> ToolError:
    where = f"{source}:{number}" if number else source
    return ToolError(f"trace {where} {what}", ErrorKind.INVALID_INPUT)
