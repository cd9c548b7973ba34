"""`sleuth export otel`: a recorded run gives the spans it gave live (same ids, same times,
same attributes), exporting twice gives the same ids, a resumed run is one trace with its
segments, OTLP/JSON to a file carries the same trace, and an edited transcript is refused."""

from __future__ import annotations

import json
from pathlib import Path

from sleuth.telemetry import ids
from sleuth.transcripts.events import (
    ContentBlock,
    ModelResponse,
    ModelTurn,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
)
from sleuth.transcripts.results import ToolResult
from sleuth.transcripts.store import TranscriptWriter
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, flat_spans
from tests.test_telemetry import QUESTION, demo, sleuth

__all__ = ["demo"]  # the fixture, shared


def tree(spans: list[ReceivedSpan]) -> list[tuple[object, ...]]:
    return sorted(
        (
            s.name,
            s.trace_id,
            s.span_id,
            s.parent_id,
            s.kind,
            s.start_ns,
            s.end_ns,
            json.dumps(s.attributes, sort_keys=True),
            json.dumps(s.events, sort_keys=True),
            s.links,
            s.status,
        )
        for s in spans
    )


def test_a_transcript_exported_later_gives_the_live_run_s_spans_and_the_same_ids_again(
    demo: Path,
) -> None:
    with OtlpReceiver() as live:
        done = sleuth(
            demo, "ask", QUESTION, "--provider", "playbook", "--json", "--otlp-endpoint", live.url
        )
    assert done.returncode == 0, done.stderr
    transcript = json.loads(done.stdout)["transcript"]
    with OtlpReceiver() as later:
        exported = sleuth(demo, "export", "otel", transcript, "--endpoint", later.url, "--json")
        again = sleuth(demo, "export", "otel", transcript, "--endpoint", later.url)
    assert exported.returncode == 0 and again.returncode == 0, exported.stderr + again.stderr
    assert json.loads(exported.stdout)["spans"] == len(live.spans())
    first, second = (flat_spans(request) for request in later.traces)
    assert tree(live.spans()) == tree(first) == tree(second)
    # The metrics too, but for the resource: each exporting process is its own instance.
    assert len(later.metrics) == 2 and len(live.metrics) == 1
    sent = [m.resource_metrics[0].scope_metrics[0] for m in (live.metrics[0], later.metrics[0])]
    assert sent[0].SerializeToString() == sent[1].SerializeToString()


def test_otlp_json_to_a_file_holds_the_trace_with_hex_ids(demo: Path) -> None:
    done = sleuth(demo, "ask", QUESTION, "--provider", "playbook", "--json")
    transcript = json.loads(done.stdout)["transcript"]
    out = demo / "run.otlp.json"
    written = sleuth(demo, "export", "otel", transcript, "--file", str(out), "--json")
    assert written.returncode == 0, written.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    traces, metrics = lines[0], lines[1:]
    spans = traces["resourceSpans"][0]["scopeSpans"][0]["spans"]
    session = json.loads(Path(demo / transcript).read_text().splitlines()[0])["session_id"]
    assert {s["traceId"] for s in spans} == {f"{ids.trace_id(session):032x}"}
    assert json.loads(written.stdout)["traces"] == [f"{ids.trace_id(session):032x}"]
    root = next(s for s in spans if s["name"] == "invoke_agent sleuth")
    assert all(s.get("parentSpanId") == root["spanId"] for s in spans if s is not root)
    assert all(len(s["spanId"]) == 16 for s in spans)
    names = {m["name"] for m in metrics[0]["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]}
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= names


def resumed_transcript(folder: Path) -> Path:
    """A run that crashed after its first turn's call and was resumed: two segments."""
    start = SessionStarted(session_id="resumed01", question="q", hosts=[], brain="playbook")
    call = ContentBlock(type="tool_use", id="pb_1_1", name="list_dir", input={"path": "."})
    with TranscriptWriter.create(folder, "resumed01") as writer:
        writer.append(start)
        writer.append(turn(1, [call]))
        writer.append(
            ToolExecuted(
                call_id="pb_1_1",
                tool="list_dir",
                input={"path": "."},
                host="local",
                result=ToolResult(ok=True, output="a\n"),
            )
        )
    with TranscriptWriter.reopen(writer.path) as again:
        again.append(start.model_copy(update={"resumed_from": str(writer.path)}))
        again.append(turn(2, []))
        again.append(SessionEnded(status="unsupported"))
    return writer.path


def turn(n: int, calls: list[ContentBlock]) -> ModelTurn:
    response = ModelResponse(
        content=calls or [ContentBlock(type="text", text="done")],
        stop_reason="tool_use" if calls else "end_turn",
    )
    return ModelTurn(turn=n, request_messages=n, request_hash="", response=response, latency_s=0.25)


def test_a_resumed_run_exports_as_one_trace_with_its_segments(tmp_path: Path) -> None:
    path = resumed_transcript(tmp_path / "transcripts")
    with OtlpReceiver() as receiver:
        done = sleuth(tmp_path, "export", "otel", str(path), "--endpoint", receiver.url)
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    assert {s.trace_id for s in spans} == {f"{ids.trace_id('resumed01'):032x}"}
    first, second = sorted(
        (s for s in spans if s.name == "invoke_agent sleuth"),
        key=lambda s: s.attributes["sleuth.segment"],
    )
    assert first.parent_id == "" and second.parent_id == first.span_id
    assert first.attributes["sleuth.status"] == "unfinished"
    assert second.attributes["sleuth.status"] == "unsupported"
    assert second.attributes["sleuth.resumed_from"] == str(path)
    by_turn = {s.attributes["sleuth.turn"]: s for s in spans if s.name == "chat"}
    assert by_turn[1].parent_id == first.span_id and by_turn[2].parent_id == second.span_id
    [call] = [s for s in spans if s.name == "execute_tool list_dir"]
    assert call.parent_id == first.span_id
    # The crashed segment ends with its last event, before the resume began.
    assert first.end_ns == call.end_ns <= second.start_ns


def test_an_edited_transcript_is_refused(demo: Path) -> None:
    done = sleuth(demo, "ask", QUESTION, "--provider", "playbook", "--json")
    path = demo / json.loads(done.stdout)["transcript"]
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"turn":1', '"turn":7')
    path.write_text("\n".join(lines) + "\n")
    refused = sleuth(demo, "export", "otel", str(path), "--file", str(demo / "out.json"))
    assert refused.returncode == 1
    assert "NOT VERIFIED" in refused.stderr and not (demo / "out.json").exists()


def test_export_needs_a_destination(demo: Path) -> None:
    done = sleuth(demo, "export", "otel", "t.jsonl")
    assert done.returncode == 2 and "--endpoint" in done.stderr
    both = sleuth(demo, "export", "otel", "t.jsonl", "--endpoint", "http://x:1", "--file", "o")
    assert both.returncode == 2
