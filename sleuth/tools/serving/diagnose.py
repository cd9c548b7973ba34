"""Why a server failed, at launch or while serving, read from the engine's own log.

`diagnose(log_lines)` returns a `Diagnosis`: a `kind` from a fixed set, how sure it is, the
line that states the cause with every prefix removed (the headline), the log lines it rests
on (as logged), and a fix that uses the numbers the engine logged.

The kinds and their patterns are a table (diagnose_rules.RULES, the engines' own wording);
the prefixes are stripped by diagnose_lines; the fixes are built by diagnose_fixes. When no
rule points to one cause, the kind is `unknown` with low confidence and the best candidate
lines, never a confident guess. An out-of-memory error is placed by the phase it struck in
(loading weights, the profile run, CUDA graph capture), read from its traceback frames and
the start-up milestones before it. The phase (startup, warm-up, serving) is read from the
lines before the failure (diagnose_phase); a failure of a running server is explained with
what its log states about it (diagnose_runtime).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from pydantic import BaseModel, Field

from sleuth.tools.serving import diagnose_runtime as runtime
from sleuth.tools.serving.diagnose_facts import Engine, Facts, numbers_in_log, numbers_near
from sleuth.tools.serving.diagnose_fixes import FIXES
from sleuth.tools.serving.diagnose_lines import Line, frames, headline, parse
from sleuth.tools.serving.diagnose_phase import ROUTINE, Phase, phase_at
from sleuth.tools.serving.diagnose_rules import RULES, Confidence, FailureKind, Rule
from sleuth.tools.serving.diagnose_sure import SURE_IF

WINDOW = 80
"""Lines either side of a hit searched for its traceback (vLLM logs the message first)."""
ENGINE_SAMPLE = 2000
"""Lines read at each end of a log to tell the engine."""


class Diagnosis(BaseModel):
    """A failed launch, explained. Sits under the launch result's `data.diagnosis`."""

    kind: FailureKind = Field(description="What went wrong, from a fixed set")
    confidence: Confidence = Field(
        "high", description="high: the log states this cause; low: the best reading of it"
    )
    headline: str = Field(description="The log line that states the cause, prefixes removed")
    evidence: list[str] = Field(description="Log lines the diagnosis rests on, as logged")
    fix: str = Field(description="What to change, with the numbers the engine logged")
    numbers: dict[str, str] = Field(
        default_factory=dict, description="Numbers the log states, by name, as logged"
    )
    candidates: list[str] = Field(
        default_factory=list,
        description="Other lines that may state the cause (for unknown or low confidence)",
    )
    phase: Phase = Field(
        "startup",
        description="startup, warm-up (CUDA-graph capture, compile) or serving: how far the "
        "server had got when it failed, read from the lines before the failure",
    )
    sure_if: str = Field("", description="For a low-confidence reading: what would make it sure")


WEIGHTS_DONE = (
    "Model loading took",
    "Loading weights took",
    "model weights took",
    "Load weight end",
)
WEIGHTS_BEGIN = ("Load weight begin", "Starting to load model", "checkpoint shards:")
CAPTURE_BEGIN = ("Capture cuda graph begin", "Capturing CUDA graph", "Capturing cudagraph")
_CAPTURE_FRAMES = re.compile(r"capture|cuda_graph|cudagraph", re.IGNORECASE)
_ACTIVATION_FRAMES = re.compile(
    r"profile_run|determine_num_available_blocks|determine_available_memory|_dummy_run"
    r"|_dummy_sampler_run|profile_max_num_token|warmup_model"
)
_WEIGHT_FRAMES = re.compile(
    r"load_model|load_weights|create_weights|weight_loader|_initialize_model|get_model"
)
_PHASE_FRAMES: tuple[tuple[re.Pattern[str], FailureKind], ...] = (
    (_CAPTURE_FRAMES, "cuda_graph_capture"),
    (_ACTIVATION_FRAMES, "oom_activation"),
    (_WEIGHT_FRAMES, "oom_weights"),
)
_SGLANG = re.compile(r"sglang[./]|\bsglang\b.*launch_server|Scheduler hit an exception| TP\d+\]")
_VLLM = re.compile(r"vllm|EngineCore|VllmWorker", re.IGNORECASE)


def diagnose(
    lines: Sequence[str], *, exit_code: int | None = None, engine: Engine | None = None
) -> Diagnosis:
    """Explain a failed launch from its log lines (as diagnose_lines.split_lines gives them)."""
    parsed = parse(list(lines))
    engine = engine or detect_engine(parsed)
    # A long log is mostly the lines an engine writes for every batch and request; no rule
    # names them, so only the others are searched rule by rule.
    candidates = [line for line in parsed if not ROUTINE.search(line.msg)]
    for rule in RULES:
        hit = _find(rule, candidates, parsed)
        if hit is None:
            continue
        kind, confidence, phase_line = rule.kind, rule.confidence, None
        phase = phase_at(parsed, hit.index, _window(parsed, hit))
        if rule.refine == "oom_phase":
            kind, confidence, phase_line = _oom_phase(parsed, candidates, hit)
            if phase == "serving" and kind != "cuda_graph_capture":
                kind, confidence = "oom_serving", "high"
        found = _explain(parsed, candidates, hit, rule, kind, confidence, phase_line)
        return _runtime(parsed, candidates, hit, rule, found, phase, engine)
    return _unexplained(parsed, candidates, exit_code, engine)


def render(d: Diagnosis) -> list[str]:
    """The diagnosis as the lines a person or a model reads."""
    lines = [f"diagnosis: {d.kind}: {d.headline}", f"phase: {d.phase}"]
    if d.confidence == "low":
        lines.append("confidence: low (a likely reading, not a stated cause)")
        if d.sure_if:
            lines.append(f"to be sure: {d.sure_if}")
    lines.append(f"fix: {d.fix}")
    if d.evidence:
        lines += ["evidence:", *(f"  {line}" for line in d.evidence)]
    if d.candidates:
        lines += ["other lines that may state the cause:", *(f"  {c}" for c in d.candidates)]
    return lines


def detect_engine(parsed: list[Line]) -> Engine | None:
    """SGLang when its own code or prefixes show (it imports vLLM's too), else vLLM; read
    from the start of the log (the launch) and its end (the failure)."""
    sample = (
        parsed
        if len(parsed) <= 2 * ENGINE_SAMPLE
        else [
            *parsed[:ENGINE_SAMPLE],
            *parsed[-ENGINE_SAMPLE:],
        ]
    )
    if any(_SGLANG.search(line.raw) for line in sample):
        return "sglang"
    if any(_VLLM.search(line.raw) for line in sample):
        return "vllm"
    return None


def _find(rule: Rule, candidates: list[Line], parsed: list[Line]) -> Line | None:
    """The line that best states this rule's cause: an exception line before one logged at
    ERROR, before an unmarked one; the last of equals (the outermost exception)."""
    best: Line | None = None
    for line in candidates:
        if best is not None and rule.first and line.rank <= best.rank:
            continue
        quiet = line.rank == 0 or line.msg[:7].lower() == "warning"
        if (quiet and not rule.quiet_ok) or (rule.exceptions_only and not line.is_exception):
            continue
        if not rule.pattern.search(line.msg):
            continue
        if rule.within is not None and _near(parsed, line, rule.within) is None:
            continue
        if best is None or line.rank >= best.rank:
            best = line
    return best


def _near(parsed: list[Line], hit: Line, pattern: re.Pattern[str]) -> Line | None:
    for line in _window(parsed, hit):
        if line is not hit and pattern.search(line.msg):
            return line
    return None


def _window(parsed: list[Line], hit: Line) -> list[Line]:
    # Lines are in log order: the window is a slice, found by bisection (logs run long).
    start = bisect_left(parsed, hit.index - WINDOW, key=lambda line: line.index)
    end = bisect_right(parsed, hit.index + WINDOW, key=lambda line: line.index)
    return parsed[start:end]


def _position(parsed: list[Line], line: Line) -> int:
    return bisect_left(parsed, line.index, key=lambda p: p.index)


def _oom_phase(
    parsed: list[Line], candidates: list[Line], hit: Line
) -> tuple[FailureKind, Confidence, Line | None]:
    """Which start-up phase ran out of GPU memory: the OOM's own traceback frames first,
    then the last milestone the log reached before it."""
    names = " ".join(func for _, func in frames(_window(parsed, hit)))
    for pattern, kind in _PHASE_FRAMES:
        if pattern.search(names):
            return kind, "high", None
    for line in reversed([p for p in candidates if p.index < hit.index]):
        if any(m in line.msg for m in CAPTURE_BEGIN):
            return "cuda_graph_capture", "high", line
        if any(m in line.msg for m in WEIGHTS_DONE):
            return "oom_activation", "high", line
        if any(m in line.msg for m in WEIGHTS_BEGIN):
            return "oom_weights", "high", line
    loading = next((p for p in _window(parsed, hit) if "checkpoint shards:" in p.msg), None)
    if loading is not None and "100%" not in loading.msg:
        return "oom_weights", "high", loading
    return "oom_weights", "low", None


def _explain(
    parsed: list[Line],
    candidates: list[Line],
    hit: Line,
    rule: Rule,
    kind: FailureKind,
    confidence: Confidence,
    phase_line: Line | None,
) -> Diagnosis:
    cause = _cause_line(parsed, hit)
    before = [p for p in parsed if p.index < cause.index]
    text, source = headline(cause, before)
    numbers = {
        **numbers_in_log([p.msg for p in candidates]),
        **numbers_near(_message_block(parsed, cause)),
    }
    supporting = _near(parsed, hit, rule.within) if rule.within else None
    shown = {line.index: line for line in (source, cause, hit, phase_line, supporting) if line}
    return Diagnosis(
        kind=kind,
        confidence=confidence,
        headline=text,
        evidence=[shown[i].raw.strip()[:1000] for i in sorted(shown)],
        fix="",
        numbers=numbers,
    )


def _runtime(
    parsed: list[Line],
    candidates: list[Line],
    hit: Line,
    rule: Rule,
    found: Diagnosis,
    phase: Phase,
    engine: Engine | None,
) -> Diagnosis:
    """The phase, what a runtime failure states about itself, how sure the reading is, and
    the fix written from all of it."""
    kind, confidence, numbers = found.kind, found.confidence, dict(found.numbers)
    window = _window(parsed, hit)
    if kind == "cuda_graph_capture":
        phase = "serving" if phase == "serving" else "warm-up"
        inner = runtime.inner_cause(window)
        if inner:
            numbers["inner_cause"] = inner
    elif kind == "nccl_timeout":
        numbers.update(runtime.nccl_timeout(parsed))
    elif kind == "kv_exhaustion":
        phase = "serving"
        numbers.update(runtime.kv_pressure(parsed))
        confidence = "high" if runtime.is_storm(numbers) or hit.is_exception else "low"
    elif kind == "no_progress":
        numbers.update(runtime.progress(parsed, hit))
        if "watchdog_timeout" not in hit.msg and phase != "serving":
            confidence = "low"
    elif kind == "illegal_memory_access":
        numbers.update(runtime.fault_site(window, hit))
        confidence = "high" if numbers.get("site_stated") else "low"
    fix = FIXES[rule.fix](Facts(found.headline, numbers, engine, kind, phase))
    low = confidence == "low" or kind == "unknown"
    return found.model_copy(
        update={
            "kind": kind,
            "confidence": confidence,
            "numbers": numbers,
            "fix": fix,
            "phase": phase,
            "candidates": _candidates(candidates, found.headline) if low else [],
            "sure_if": SURE_IF.get(kind, SURE_IF["unknown"]) if low else "",
        }
    )


def _cause_line(parsed: list[Line], hit: Line) -> Line:
    """The hit; the pydantic `Value error, ...` line whose wrapped message it continues; or,
    when the hit only introduces the next line (`... raised:`), that line."""
    position = _position(parsed, hit)
    if hit.is_exception:
        following = parsed[position + 1 : position + 2]
        if hit.msg.endswith(":") and following and following[0].is_exception:
            return following[0]
        return hit
    for prior in reversed(parsed[max(0, position - 2) : position]):
        if prior.msg.startswith(("Value error, ", "Assertion error, ")):
            return prior
    return hit


def _message_block(parsed: list[Line], cause: Line) -> str:
    """The cause line and the lines its message wraps onto (SGLang splits its OOM report)."""
    position = _position(parsed, cause)
    block = [cause.msg]
    for line in parsed[position + 1 : position + 9]:
        if line.is_exception or line.msg.startswith(("Traceback", "File ")):
            break
        block.append(line.msg)
    return " ".join(block)


def _candidates(parsed: list[Line], chosen: str) -> list[str]:
    seen: list[str] = []
    for line in reversed(parsed):
        if (
            line.is_exception
            and not line.is_wrapper
            and line.msg != chosen
            and line.msg not in seen
        ):
            seen.append(line.msg[:500])
    return seen[:3]


def _unexplained(
    parsed: list[Line], candidates: list[Line], exit_code: int | None, engine: Engine | None
) -> Diagnosis:
    """No rule applies: the last exception that names a cause, else the last pointer to one,
    else the last line logged at ERROR; a log with none of them shows no failure."""
    picks = (
        [p for p in candidates if p.is_exception and not p.is_wrapper],
        [p for p in candidates if p.is_exception],
        [p for p in candidates if p.rank == 2],
    )
    line = next((group[-1] for group in picks if group), None)
    if line is None:
        return _no_failure(parsed, exit_code)
    text, source = headline(line, [p for p in parsed if p.index < line.index])
    return Diagnosis(
        kind="unknown",
        confidence="low",
        headline=text,
        evidence=[source.raw.strip()[:1000]],
        fix=_ended(exit_code)
        if not line.is_exception
        else FIXES["unknown"](Facts(text, {}, engine, "unknown")),
        numbers=numbers_near(_message_block(parsed, line)),
        candidates=_candidates(candidates, text),
        phase=phase_at(parsed, line.index),
        sure_if=SURE_IF["unknown"],
    )


def _no_failure(parsed: list[Line], exit_code: int | None) -> Diagnosis:
    """No exception and no line logged at ERROR: the log shows no failure, and says how far
    the server got (its last batch line, if it served)."""
    if not parsed:
        return Diagnosis(
            kind="no_failure",
            confidence="low",
            headline="(the log is empty)",
            evidence=[],
            fix=_ended(exit_code),
            sure_if=SURE_IF["no_failure"],
        )
    last = parsed[-1]
    numbers = runtime.progress(parsed, Line(last.index + 1, "", "", ""))
    return Diagnosis(
        kind="no_failure",
        confidence="low",
        headline=last.msg[:2000],
        evidence=[last.raw.strip()[:1000]],
        fix=_ended(exit_code),
        numbers={k: v for k, v in numbers.items() if k == "last_batch"},
        phase=phase_at(parsed, last.index + 1),
        sure_if=SURE_IF["no_failure"],
    )


def _ended(exit_code: int | None) -> str:
    if exit_code is None:
        return (
            "the log shows no failure (no exception, nothing logged at ERROR): if the server "
            "stopped, the cause is outside this log"
        )
    return (
        f"the process ended (exit code {exit_code}) without a recognised error; read the log tail"
    )
