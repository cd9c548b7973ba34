"""The semantic conventions Sleuth's spans and metrics follow, pinned to one release.

GenAI conventions v1.41.0: the last release of them in open-telemetry/semantic-conventions
(they have since moved to semantic-conventions-genai, which renames spans and metrics). In
that release the provider is `gen_ai.provider.name` (`gen_ai.system` before v1.37), an agent
run is `invoke_agent {gen_ai.agent.name}`, a model request `chat {gen_ai.request.model}`, a
tool call `execute_tool {gen_ai.tool.name}`, and an MCP server's tool call `tools/call {name}`
(SERVER kind) with the client's span, carried in `params._meta`, as its parent.
"""

from __future__ import annotations

SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
AGENT_NAME = "sleuth"
SCOPE = "sleuth.telemetry"

PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "playbook": "sleuth.playbook",
    "replay": "sleuth.replay",
}
"""`gen_ai.provider.name` by brain: the well-known values where one applies; the offline
brains are Sleuth's own (a custom value, as the conventions allow)."""
REMOTE_BRAINS = frozenset({"anthropic", "openai"})
"""Brains whose turns are requests to another process: their chat spans are CLIENT spans."""
AGENT_BRAINS = frozenset(PROVIDERS)
"""Sessions in which Sleuth is the agent (`invoke_agent`); `sleuth tool` and `sleuth mcp`
sessions are driven by a person or a client, and their root span says which."""
MCP_BRAIN = "mcp"

TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""`gen_ai.client.token.usage`'s explicit bucket boundaries, as the conventions give them."""
DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""`gen_ai.client.operation.duration`'s explicit bucket boundaries, in seconds."""
