"""`sleuth mcp --otlp-endpoint`: a client that traces sends its span in `params._meta`
(`traceparent`, as the official SDK's client injects it); the tool call's span continues the
client's trace as a `tools/call` server span, linked to the MCP session's own span."""

from __future__ import annotations

from pathlib import Path

import anyio
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from sleuth.telemetry import ids
from tests.mcp_support import CLIENT, McpProject, call_id_of
from tests.otlp_receiver import OtlpReceiver

CLIENT_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CLIENT_SPAN = 0x00F067AA0BA902B7
SPAN_KIND_SERVER = 2


def test_a_tool_call_continues_the_client_s_trace_from_params_meta(tmp_path: Path) -> None:
    project = McpProject.create(tmp_path)
    client_span = NonRecordingSpan(
        SpanContext(CLIENT_TRACE, CLIENT_SPAN, is_remote=False, trace_flags=TraceFlags(1))
    )

    async def session(url_of_receiver: str) -> tuple[str, str]:
        with project.http_server("--otlp-endpoint", url_of_receiver) as served:
            async with served.client(client_info=CLIENT) as client:
                with trace.use_span(client_span):  # the client's span: its SDK injects it
                    traced = await client.call_tool(
                        "read_lines", {"host": "local", "path": "notes.txt"}
                    )
                untraced = await client.call_tool("list_dir", {"host": "local", "path": "."})
        return call_id_of(traced), call_id_of(untraced)

    with OtlpReceiver() as receiver:
        traced_id, untraced_id = anyio.run(session, receiver.url)
    spans = {s.attributes.get("gen_ai.tool.call.id", s.name): s for s in receiver.spans()}
    root = spans["sleuth mcp"]
    session_id = root.attributes["gen_ai.conversation.id"]
    assert root.trace_id == f"{ids.trace_id(session_id):032x}" and root.parent_id == ""
    assert root.attributes["sleuth.mcp.client"] == f"{CLIENT.name} {CLIENT.version}"
    traced = spans[traced_id]
    assert traced.name == "tools/call read_lines" and traced.kind == SPAN_KIND_SERVER
    assert (traced.trace_id, traced.parent_id) == (f"{CLIENT_TRACE:032x}", f"{CLIENT_SPAN:016x}")
    assert traced.links == [(root.trace_id, root.span_id)]
    assert traced.attributes["mcp.method.name"] == "tools/call"
    assert traced.attributes["gen_ai.operation.name"] == "execute_tool"
    assert traced.attributes["gen_ai.tool.name"] == "read_lines"
    untraced = spans[untraced_id]
    assert (untraced.trace_id, untraced.parent_id) == (root.trace_id, root.span_id)
    assert untraced.links == []
