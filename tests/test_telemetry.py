"""Live export, as an operator runs it: `sleuth ask --otlp-endpoint` against a real OTLP/HTTP
receiver (the protobuf decoded with the opentelemetry-proto classes), for the offline playbook
on the demo deployment and for Claude through the real Anthropic SDK over loopback. The spans'
names, parents, GenAI attributes and metrics are read back; no content or secret leaves by
default, and with --otel-content the content comes redacted as the transcript holds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sleuth.demo_deployment import build_demo
from sleuth.telemetry import ids
from sleuth.transcripts.store import load
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.scripted_api import ScriptedAPI, finding, message, text, tool_use

CANARY = "hf_" + "Zq8Xw2Lk5Pm9Rt4Vb7Nc1Hy6Jd3Gs0Fa"
"""A token-shaped secret planted in a file the run reads (the redactor knows its shape)."""
KEY = "sk-ant-test-key-0123456789abcdefghij"
QUESTION = "Does DeepSeek-V3-demo-FP8 still carry the MTP heads its config declares?"
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "sleuth.argv",
    "sleuth.finding.claim",
    "sleuth.error.message",
)
OTEL_VARS = ("OTEL_", "ANTHROPIC_", "OPENAI_")
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3


def sleuth(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(OTEL_VARS)}
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        cwd=cwd,
        env={**base, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def ask_demo(demo: Path, receiver_url: str) -> subprocess.CompletedProcess[str]:
    """The demo question answered by the offline playbook, exporting to the receiver."""
    return sleuth(
        demo, "ask", QUESTION, "--provider", "playbook", "--json", "--otlp-endpoint", receiver_url
    )


def ask_claude(
    project: Path, api_url: str, receiver_url: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`sleuth ask` through the Anthropic SDK against the scripted API, exporting to the
    receiver."""
    return sleuth(
        project,
        "ask",
        "Is MTP declared?",
        *("--model", "claude-test", "--json", "--otlp-endpoint", receiver_url, *extra),
        ANTHROPIC_BASE_URL=api_url,
        ANTHROPIC_API_KEY=KEY,
    )


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    build_demo(tmp_path / "deployment")
    (tmp_path / "sleuth.toml").write_text(
        f"[hosts.local]\nroots = [{json.dumps(str(tmp_path / 'deployment'))}]\n"
    )
    return tmp_path


@pytest.fixture
def claude_project(tmp_path: Path) -> Path:
    config = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
    (tmp_path / "config.json").write_text(json.dumps({**config, "hub_token": CANARY}, indent=2))
    return tmp_path


def claude_script() -> list[Any]:
    return [
        message(text("Reading the config."), tool_use("toolu_1", "read_json", path="config.json")),
        message(
            finding(
                "toolu_2",
                "The config declares one MTP layer.",
                [("toolu_1", '"num_nextn_predict_layers": 1')],
            ),
            cache_read=40,
        ),
        message(text("Yes: one MTP (NextN) layer is declared.")),
    ]


def by_name(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    named: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        named.setdefault(span.name, []).append(span)
    return named


def transcript_of(done: subprocess.CompletedProcess[str], cwd: Path) -> Path:
    assert done.returncode == 0, done.stderr
    return cwd / json.loads(done.stdout)["transcript"]


def everything_sent(receiver: OtlpReceiver) -> bytes:
    return b"".join(r.SerializeToString() for r in [*receiver.traces, *receiver.metrics])


def test_the_demo_playbook_run_is_one_trace_of_genai_spans_timed_by_its_transcript(
    demo: Path,
) -> None:
    with OtlpReceiver() as receiver:
        done = ask_demo(demo, receiver.url)
    path = transcript_of(done, demo)
    events = load(path).events
    start, end = events[0], events[-1]
    spans = receiver.spans()
    named = by_name(spans)
    [root] = named["invoke_agent sleuth"]
    assert {s.trace_id for s in spans} == {f"{ids.trace_id(start.session_id):032x}"}
    assert root.parent_id == "" and all(s.parent_id == root.span_id for s in spans if s != root)
    turns = [e for e in events if e.type == "model_turn"]
    calls = [e for e in events if e.type == "tool_executed"]
    assert len(named["chat"]) == len(turns) and all(s.kind == SPAN_KIND_INTERNAL for s in spans)
    assert sorted(s.name for s in spans if s.name.startswith("execute_tool ")) == sorted(
        f"execute_tool {c.tool}" for c in calls
    )
    attrs = root.attributes
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "sleuth"
    assert attrs["gen_ai.provider.name"] == "sleuth.playbook"
    assert attrs["gen_ai.conversation.id"] == start.session_id
    assert attrs["sleuth.transcript.path"] == str(path.resolve())
    assert attrs["sleuth.transcript.head"] == end.hash
    assert attrs["sleuth.status"] == "answered"
    assert attrs["sleuth.hosts"] == ["local"]
    assert attrs["sleuth.findings.grounded"] >= 1 and "sleuth.findings.ungrounded" not in attrs
    assert [name for name, _ in root.events].count("sleuth.finding") == attrs["sleuth.findings"]
    assert root.resource["service.name"] == "sleuth"
    assert root.scope_schema == "https://opentelemetry.io/schemas/1.41.0"
    # Recorded times: the root spans the transcript, a call ends when it was recorded and
    # lasts its recorded duration.
    assert (root.start_ns, root.end_ns) == (nanos(start.ts), nanos(end.ts))
    for call in calls:
        [span] = [s for s in spans if s.attributes.get("gen_ai.tool.call.id") == call.call_id]
        assert span.end_ns == nanos(call.ts)
        assert span.end_ns - span.start_ns == round(call.result.duration_s * 1e9)
        assert span.attributes["gen_ai.tool.name"] == call.tool
        assert span.attributes.get("sleuth.host") == (call.host or None)
        assert span.span_id == f"{ids.span_id(start.session_id, 'call', call.call_id):016x}"
    for span in spans:
        assert not set(CONTENT_KEYS) & set(span.attributes), span.name
    assert QUESTION.encode() not in everything_sent(receiver)
    input_tokens = receiver.points("gen_ai.client.token.usage")
    assert {a["gen_ai.token.type"] for a, _ in input_tokens} == {"input", "output"}
    durations = receiver.points("gen_ai.client.operation.duration")
    tools = [p for a, p in durations if a["gen_ai.operation.name"] == "execute_tool"]
    assert sum(p.count for p in tools) == len(calls)


def nanos(ts: str) -> int:
    from sleuth.telemetry.convert import nanos as convert

    return convert(ts)


def test_claude_through_the_sdk_exports_chat_and_tool_spans_and_no_secret_by_default(
    claude_project: Path,
) -> None:
    with ScriptedAPI(claude_script()) as api, OtlpReceiver() as receiver:
        done = ask_claude(claude_project, api.url, receiver.url)
    path = transcript_of(done, claude_project)
    turns = [e for e in load(path).events if e.type == "model_turn"]
    named = by_name(receiver.spans())
    [root] = named["invoke_agent sleuth"]
    chats = sorted(named["chat claude-test"], key=lambda s: s.attributes["sleuth.turn"])
    assert len(chats) == 3 and all(s.kind == SPAN_KIND_CLIENT for s in chats)
    first, second = chats[0].attributes, chats[1].attributes
    assert first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == first["gen_ai.response.model"] == "claude-test"
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (100, 20)
    # Anthropic counts cached tokens apart; the conventions count them in the input.
    assert second["gen_ai.usage.input_tokens"] == 140
    assert second["gen_ai.usage.cache_read.input_tokens"] == 40
    for span, turn in zip(chats, turns, strict=True):
        assert span.end_ns - span.start_ns == round(turn.latency_s * 1e9)
    [read] = named["execute_tool read_json"]
    [report] = named["execute_tool report_finding"]
    assert read.attributes["gen_ai.tool.call.id"] == "toolu_1"
    assert read.attributes["gen_ai.tool.type"] == "function"
    assert report.attributes["sleuth.grounding.grounded"] == 1
    assert {s.parent_id for s in [*chats, read, report]} == {root.span_id}
    assert root.attributes["gen_ai.usage.input_tokens"] == 340
    sent = everything_sent(receiver)
    assert CANARY.encode() not in sent and KEY.encode() not in sent
    assert b"num_nextn_predict_layers" not in sent and b"Is MTP declared?" not in sent
    usage = receiver.points("gen_ai.client.token.usage")
    inputs = [p for a, p in usage if a["gen_ai.token.type"] == "input"]
    assert sum(p.sum for p in inputs) == 340 and sum(p.count for p in inputs) == 3
    assert all(a["gen_ai.request.model"] == "claude-test" for a, _ in usage)
    [cost] = receiver.points("sleuth.client.cost")
    assert cost[1].as_double == pytest.approx(sum(t.cost_usd for t in turns))


def test_otel_content_exports_the_conversation_redacted_as_the_transcript_holds_it(
    claude_project: Path,
) -> None:
    with ScriptedAPI(claude_script()) as api, OtlpReceiver() as receiver:
        done = ask_claude(claude_project, api.url, receiver.url, "--otel-content")
    assert done.returncode == 0, done.stderr
    named = by_name(receiver.spans())
    [read] = named["execute_tool read_json"]
    result = read.attributes["gen_ai.tool.call.result"]
    assert "num_nextn_predict_layers" in result and "[redacted" in result.lower()
    assert json.loads(read.attributes["gen_ai.tool.call.arguments"])["path"] == "config.json"
    [root] = named["invoke_agent sleuth"]
    asked = json.loads(root.attributes["gen_ai.input.messages"])
    assert asked[0]["parts"][0]["content"] == "Is MTP declared?"
    said = [json.loads(s.attributes["gen_ai.output.messages"]) for s in named["chat claude-test"]]
    assert any(p.get("name") == "read_json" for m in said for p in m[0]["parts"])
    sent = everything_sent(receiver)
    assert CANARY.encode() not in sent and KEY.encode() not in sent


def test_a_question_carrying_a_secret_is_exported_redacted(demo: Path) -> None:
    token = "sk-ant-api03-" + "Q" * 40
    with OtlpReceiver() as receiver:
        done = sleuth(
            demo,
            "ask",
            f"{QUESTION} (key {token})",
            "--provider",
            "playbook",
            "--json",
            "--otlp-endpoint",
            receiver.url,
            "--otel-content",
        )
    assert done.returncode == 0, done.stderr
    [root] = by_name(receiver.spans())["invoke_agent sleuth"]
    asked = root.attributes["gen_ai.input.messages"]
    assert QUESTION in asked and token not in asked and "[redacted" in asked.lower()
    assert token.encode() not in everything_sent(receiver)


def test_a_dead_collector_warns_once_and_never_fails_or_holds_the_run(demo: Path) -> None:
    with OtlpReceiver() as receiver:
        dead = receiver.url  # closed once the block ends: nothing listens there
    began = time.monotonic()
    done = sleuth(
        demo, "ask", QUESTION, "--provider", "playbook", "--json", "--otlp-endpoint", dead
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "answered"
    assert done.stderr.count("telemetry: the collector at") == 1
    assert took < 30


def test_a_collector_that_refuses_is_reported_and_the_run_still_answers(demo: Path) -> None:
    with OtlpReceiver(status=400) as receiver:
        done = ask_demo(demo, receiver.url)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("telemetry: the collector at") == 1


def test_the_standard_variables_turn_export_on_without_the_flag(demo: Path) -> None:
    with OtlpReceiver() as receiver:
        done = sleuth(
            demo,
            "ask",
            QUESTION,
            "--provider",
            "playbook",
            "--json",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.url}/v1/traces",
        )
    assert done.returncode == 0, done.stderr
    assert by_name(receiver.spans())["invoke_agent sleuth"]
    assert receiver.metrics == []  # only a traces endpoint was named


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--otlp-endpoint", "collector:4318"], {}, "not an http(s) URL"),
        (
            [],
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "http/protobuf",
        ),
    ],
)
def test_settings_that_cannot_work_are_usage_errors_before_anything_runs(
    demo: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    done = sleuth(demo, "ask", QUESTION, "--provider", "playbook", *args, **env)
    assert done.returncode == 2 and says in done.stderr
    assert not (demo / "transcripts").exists()


def test_export_without_the_otel_extra_says_how_to_install_it(demo: Path) -> None:
    hide = demo / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('opentelemetry.sdk'):\n"
        "            raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
    )
    done = sleuth(
        demo,
        "ask",
        QUESTION,
        "--provider",
        "playbook",
        "--otlp-endpoint",
        "http://127.0.0.1:9",
        PYTHONPATH=str(hide),
    )
    assert done.returncode == 2
    assert "pip install 'sleuth[otel]'" in done.stderr
    assert not (demo / "transcripts").exists()
    plain = sleuth(demo, "ask", QUESTION, "--provider", "playbook", "--json", PYTHONPATH=str(hide))
    assert plain.returncode == 0, plain.stderr  # no export asked for: no extra needed
