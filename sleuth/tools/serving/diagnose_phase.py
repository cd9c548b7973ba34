"""Which phase a server was in when it failed, and when its log lines were written.

A log that shows the server ready (vLLM's `Uvicorn running on`, SGLang's `The server is fired
up and ready to roll!`) or serving (a request answered, a batch or throughput line) before the
failing line failed while serving; one that reached CUDA-graph capture or a compile/warm-up
step but never served failed in warm-up; anything earlier failed at start-up. The phase
changes the fix: an out-of-memory error at start wants more memory for the engine, the same
error under load wants less (more headroom for activations).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from sleuth.tools.serving.diagnose_lines import Line, frames

Phase = Literal["startup", "warm-up", "serving"]

# Lines only a server that is up writes. uvicorn's `Application startup complete` is not
# one: it comes before the port is bound, so a port clash follows it.
SERVING = re.compile(
    r"Uvicorn running on|fired up and ready to roll|Starting vLLM API server"
    r"|Avg prompt throughput|Engine \d+: Avg|Decode batch[.,]|Prefill batch[.,]"
    r"|\"(?:POST|GET) /(?:v1/\S*|generate)\S* HTTP/[\d.]+\" 200|Added request \S"
    r"|Received request|Finished request"
)
WARM_UP = re.compile(
    r"Capture cuda graph begin|Capturing CUDA graph|Capturing cudagraph|Capturing the model for "
    r"CUDA graphs|Graph capturing|Capturing batches"
)
WARM_UP_DONE = re.compile(
    r"Capture cuda graph end|Graph capturing finished|Capturing CUDA graphs? .*took"
    r"|Graph capturing took"
)
# Traceback frames of a step that serves a batch, and of start-up steps that run the same
# code on a dummy batch (profiling, warm-up, capture): the first without the second is a
# failure while serving, for logs cut to the traceback.
SERVING_FRAMES = re.compile(
    r"execute_model|exposed_step|forward_batch_generation|run_batch|process_batch_result"
    r"|_run_engine|engine_step|run_busy_loop|event_loop_\w+|_process_engine_step"
    r"|start_worker_execution_loop|step_async|\bstep\b"
)
# Failure reports only a serving engine writes: SGLang's scheduler watchdog fires only while
# a batch is running (sglang/srt/managers/scheduler.py, watchdog_thread checks cur_batch);
# vLLM V1 dumps the failed step's input (vllm/v1/engine/core.py via dump_input.py) and says
# "EngineCore encountered a fatal error" from its busy loop ("failed to start" at start-up).
SERVING_FAILURE = re.compile(
    r"Watchdog timeout \(self\.watchdog_timeout=|Dumping input data for V1 LLM engine"
    r"|Dumping scheduler output for model execution|EngineCore encountered a fatal error"
)
STARTUP_FRAMES = re.compile(
    r"profile_run|_dummy_run|_dummy_sampler_run|determine_\w+|warm_?up\w*|capture\w*"
    r"|load_model|load_weights|init_\w+|__init__|initialize\w*|profile_max_num_token"
)
BATCH = re.compile(r"Decode batch[.,]|Prefill batch[.,]|Avg prompt throughput|Engine \d+: Avg")
ROUTINE = re.compile(
    r"^(?:Decode batch[.,]|Prefill batch[.,]|Avg prompt throughput|Engine \d+: Avg"
    r"|[\d.:]+ - \"(?:POST|GET) \S+ HTTP/[\d.]+\" 2\d\d"
    r"|Added request |Finished request |Received request |File \"[^\"]+\", line \d+, in )"
)
"""Lines written for every batch or answered request, and traceback frames: the bulk of a
long log, and never the line that states a cause (frames are read around a hit instead)."""

_STAMPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)"), "%Y-%m-%d %H:%M:%S"),
    # vLLM's logger: `INFO 02-03 13:14:04`; torch's c10: `[E207 01:29:36.73`.
    (
        re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d) (\d\d:\d\d:\d\d)"),
        "%m-%d %H:%M:%S",
    ),
    (re.compile(r"\[[EWIF](\d{3,4}) (\d\d:\d\d:\d\d)"), "mmdd"),
)


def phase_at(parsed: list[Line], index: int, window: list[Line] | None = None) -> Phase:
    """The phase the log had reached before line `index`; where the log shows no milestone,
    the traceback frames in `window` (the lines around the failure)."""
    before = [line for line in parsed if line.index < index]
    if any(SERVING.search(line.raw) for line in before):
        return "serving"
    began = [line.index for line in before if WARM_UP.search(line.msg)]
    ended = [line.index for line in before if WARM_UP_DONE.search(line.msg)]
    if began and (not ended or max(ended) < max(began)):
        return "warm-up"
    if any(SERVING_FAILURE.search(line.msg) for line in window or []):
        return "serving"
    names = " ".join(func for _, func in frames(window or []))
    if SERVING_FRAMES.search(names) and not STARTUP_FRAMES.search(names):
        return "serving"
    return "startup"


def stamp(raw: str) -> datetime | None:
    """When a line was written, from its logger prefix (years are not always logged: a
    missing year reads as 1900, which keeps differences within one log right)."""
    for pattern, form in _STAMPS:
        found = pattern.search(raw)
        if not found:
            continue
        day, clock = found.groups()
        try:
            if form == "mmdd":
                return datetime.strptime(
                    f"{int(day) // 100:02d}-{int(day) % 100:02d} {clock}", "%m-%d %H:%M:%S"
                )
            return datetime.strptime(f"{day} {clock}", form)
        except ValueError:
            return None
    return None


def seconds_between(first: Line, last: Line) -> float | None:
    start, end = stamp(first.raw), stamp(last.raw)
    if start is None or end is None:
        return None
    return (end - start).total_seconds()
