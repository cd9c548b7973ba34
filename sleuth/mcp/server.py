"""The MCP face: the registry's tools, report_finding, resources and a prompt, on the official
SDK's low-level `Server`.

```python
state = ServeState(ctx, Path("transcripts"), settings)
server = build_server(state)          # then stdio.serve(server) or http.serve(server, ...)
```

A tool call becomes `McpSession.call` in a worker thread, so a slow host never blocks the
event loop and calls that arrive together run together. Everything a call can get wrong
(bad input, a path outside the roots, a refusal) comes back as an `isError` result with the
reason and the fix; the protocol itself only fails for what is not a tool call at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from importlib import metadata

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.session import tool_specs
from sleuth.mcp import resources
from sleuth.mcp.approval import answered, approver_for_call, forged, pending_approval
from sleuth.mcp.session import CallOutcome, ClientInfo
from sleuth.mcp.state import ServeState
from sleuth.transcripts.events import Finding

FINDING_SCHEMA = Finding.model_json_schema()
CALL_ID_META = "sleuth/call_id"
"""The `_meta` key of a tool result that names its call id (also said in a text block)."""
PROCESS_SESSION = "process"
"""The one session of a stdio server, and of stateless HTTP requests (no Mcp-Session-Id)."""


def build_server(state: ServeState) -> Server[ServeState]:
    @asynccontextmanager
    async def lifespan(_: Server[ServeState]) -> AsyncIterator[ServeState]:
        try:
            yield state
        finally:
            # The client is gone (stdio closed, HTTP server stopping): close each transcript.
            state.end_all()

    async def list_tools(
        ctx: ServerRequestContext[ServeState], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools())

    async def call_tool(
        ctx: ServerRequestContext[ServeState], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        key = session_key(ctx)
        # Opening a session describes its hosts, which connects to them: not on the event loop.
        session = state.sessions.get(key)
        if session is None:
            session = await anyio.to_thread.run_sync(state.session, key, client_info(ctx))
        raw = dict(params.arguments or {})
        given = answered(ctx, state, key, params)
        if given is None and (asking := pending_approval(ctx, state, key, params.name, raw)):
            return asking
        approver = approver_for_call(ctx, given, given is None and forged(params))
        call = partial(session.call, params.name, raw, approver, parent=traceparent(params))
        outcome = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        return tool_result(outcome)

    async def list_resources(
        ctx: ServerRequestContext[ServeState], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources.listing(state.transcripts))

    async def read_resource(
        ctx: ServerRequestContext[ServeState], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return resources.read(str(params.uri), state.transcripts, state.settings)

    async def list_prompts(
        ctx: ServerRequestContext[ServeState], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[INVESTIGATE])

    async def get_prompt(
        ctx: ServerRequestContext[ServeState], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return investigate_prompt(params)

    server: Server[ServeState] = Server(
        "sleuth",
        version=_version(),
        instructions=(
            "Sleuth's sandboxed, audited tools for LLM serving hosts (SGLang, vLLM). Every tool "
            "takes `host` first; paths must lie inside the host's roots. Record each claim with "
            "report_finding, quoting earlier outputs by their call ids."
        ),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # The SDK wraps every message in an OpenTelemetry span; Sleuth's record is its transcript,
    # and the span costs each call time that the 2 ms budget for the whole layer cannot spare.
    server.middleware.clear()
    return server


def mcp_tools() -> list[types.Tool]:
    """The registry's tools and report_finding, with the schemas `sleuth ask` declares.

    report_finding's result is a `Finding`, so it declares that as its output schema; the
    registry's tools return free-form `data` and declare none.
    """
    return [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema,
            output_schema=FINDING_SCHEMA if spec.name == REPORT_FINDING else None,
            annotations=types.ToolAnnotations(
                read_only_hint=not spec.mutating,
                destructive_hint=spec.mutating,
                open_world_hint=False,
            ),
        )
        for spec in tool_specs()
    ]


def tool_result(outcome: CallOutcome) -> types.CallToolResult:
    """The model's text first, then the call id report_finding quotes it by."""
    content = [
        types.TextContent(type="text", text=outcome.text or "(no output)"),
        types.TextContent(
            type="text",
            text=f"call_id: {outcome.call_id} (name it in report_finding evidence)",
        ),
    ]
    data = outcome.data
    structured = data if isinstance(data, dict) or data is None else {"value": data}
    return types.CallToolResult(
        content=content,
        structured_content=structured,
        is_error=outcome.is_error,
        meta={CALL_ID_META: outcome.call_id},
    )


def traceparent(params: types.CallToolRequestParams) -> str | None:
    """The client's W3C trace context from `params._meta` (the MCP conventions' carrier), so
    the call's span continues the client's trace when Sleuth exports telemetry."""
    found = (params.meta or {}).get("traceparent")
    return found if isinstance(found, str) else None


def session_key(ctx: ServerRequestContext[ServeState]) -> str:
    """The streamable-HTTP session id, or one session for the process (stdio, stateless)."""
    headers = getattr(ctx.request, "headers", None)
    found = headers.get("mcp-session-id") if headers is not None else None
    return str(found) if found else PROCESS_SESSION


def client_info(ctx: ServerRequestContext[ServeState]) -> ClientInfo:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return ClientInfo()
    return ClientInfo(name=info.name, version=info.version)


INVESTIGATE = types.Prompt(
    name="investigate",
    description="Sleuth's system prompt and tool guidance, with your question about a deployment.",
    arguments=[
        types.PromptArgument(
            name="question", description="What to find out, in plain words.", required=True
        )
    ],
)


def investigate_prompt(params: types.GetPromptRequestParams) -> types.GetPromptResult:
    if params.name != INVESTIGATE.name:
        raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}; try 'investigate'")
    question = (params.arguments or {}).get("question", "").strip()
    text = system_prompt() + (f"\n\nQuestion: {question}" if question else "")
    return types.GetPromptResult(
        description=INVESTIGATE.description,
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
    )


def _version() -> str:
    try:
        return metadata.version("sleuth")
    except metadata.PackageNotFoundError:
        return "0"
