"""A small but complete investigation, as events, for the transcript tests."""

from __future__ import annotations

from pathlib import Path

from sleuth.transcripts.events import (
    ApprovalEvent,
    ContentBlock,
    ErrorEvent,
    Event,
    Evidence,
    Finding,
    FindingEvent,
    HostInfo,
    ModelResponse,
    ModelTurn,
    SessionEnded,
    SessionStarted,
    ToolExecuted,
    Totals,
    Usage,
)
from sleuth.transcripts.store import TranscriptWriter

QUESTION = "Does the checkpoint on remote ship MTP heads?"
LONG_OUTPUT = "\n".join(
    f"model.layers.{i}.mtp.eh_proj.weight BF16 [7168, 14336]" for i in range(60)
)
QUOTE = "model.layers.7.mtp.eh_proj.weight BF16 [7168, 14336]"
CONFIG_QUOTE = '"num_nextn_predict_layers": 1'


def sample_events() -> list[Event]:
    """session_started, a turn, two calls (one long), an approval, an error, a finding, the end."""
    return [
        SessionStarted(
            session_id="s1",
            question=QUESTION,
            hosts=[HostInfo(name="remote", address="root@127.0.0.1:2222", fingerprint="SHA256:x")],
            brain="anthropic",
            model="claude-test",
        ),
        ModelTurn(
            turn=1,
            request_messages=1,
            request_hash="0" * 64,
            response=ModelResponse(
                content=[
                    ContentBlock(type="text", text="I will list the weights index first."),
                    ContentBlock(type="tool_use", id="toolu_01", name="checkpoint_index", input={}),
                ]
            ),
            usage=Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=900),
            latency_s=0.8,
        ),
        ToolExecuted(
            call_id="toolu_01",
            tool="checkpoint_index",
            input={"path": "/models/ds/model.safetensors.index.json"},
            host="remote",
            ok=True,
            output=LONG_OUTPUT,
            argv=[["python3", "-", "--", "/models/ds/model.safetensors.index.json"]],
            exit_code=0,
            duration_s=0.25,
        ),
        ApprovalEvent(
            call_id="toolu_02",
            tool="launch_server",
            host="remote",
            input={"engine": "vllm"},
            approved=False,
            by="policy",
            reason="mutating tools need --yes",
        ),
        ToolExecuted(
            call_id="toolu_03",
            tool="read_lines",
            input={"path": "/models/ds/config.json", "start": 1, "end": 3},
            host="remote",
            ok=True,
            output='{\n  "num_nextn_predict_layers": 1\n}',
            argv=[["sed", "-n", "1,3p", "--", "/models/ds/config.json"]],
            exit_code=0,
            duration_s=0.05,
        ),
        ErrorEvent(where="brain", message="rate limited once; retried"),
        FindingEvent(
            call_id="toolu_04",
            finding=Finding(
                claim="The checkpoint ships MTP heads",
                verdict="yes",
                confidence=0.92,
                evidence=[
                    Evidence(call_id="toolu_01", quote=QUOTE, grounded=True),
                    Evidence(
                        call_id="toolu_03", quote='"num_nextn_predict_layers": 1', grounded=True
                    ),
                ],
                grounded=True,
            ),
        ),
        SessionEnded(
            status="answered",
            summary="Yes: one MTP layer.",
            totals=Totals(turns=1, tool_calls=2, input_tokens=1200, output_tokens=80, wall_s=2.0),
        ),
    ]


def write_sample(directory: Path, events: list[Event] | None = None) -> Path:
    with TranscriptWriter.create(directory, "s1") as writer:
        for event in events if events is not None else sample_events():
            writer.append(event)
    return writer.path
