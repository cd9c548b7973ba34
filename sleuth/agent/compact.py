"""The compact request: for a served context too small for the full prompt (~6k tokens).

The compact system prompt (prompts/compact.md), each tool's first sentence and
a schema without descriptions, and only the tools the question's family needs
(the playbook's routing): e.g. an MTP question gets the file and checkpoint
readers, not `launch_server`.
"""

from __future__ import annotations

from typing import Any

from sleuth.agent.findings import REPORT_FINDING
from sleuth.agent.playbook.plan import Question
from sleuth.agent.playbook.registry import route
from sleuth.transcripts.events import ToolSpec

_READERS = ("read_json", "read_lines", "grep", "list_dir")
FAMILY_TOOLS: dict[str, tuple[str, ...]] = {
    "mtp": (*_READERS, "checkpoint_summary", "safetensors_header"),
    "quant": (*_READERS, "checkpoint_summary", "safetensors_header", "gpu_info"),
    "arch": (*_READERS, "checkpoint_summary"),
    "env": (*_READERS, "python_env", "gpu_info"),
    "engine": (*_READERS, "python_env"),
    "serve": (
        "launch_server",
        "server_status",
        "stop_server",
        "run_benchmark",
        "gpu_info",
        "list_dir",
        "read_json",
    ),
}


READERS_ONLY = (*_READERS, "checkpoint_summary")
"""The last resort when a family's tools leave too little room to answer: files and headers."""


def family_tools(
    tools: list[ToolSpec], question: str, readers_only: bool = False
) -> list[ToolSpec]:
    """The tools a question's family needs, plus report_finding; a question no family claims
    keeps every read-only tool. `readers_only` keeps just READERS_ONLY."""
    family = route(Question(question, {})) if question else None
    wanted = READERS_ONLY if readers_only else FAMILY_TOOLS.get(family or "")
    return [
        t
        for t in tools
        if t.name == REPORT_FINDING or (t.name in wanted if wanted else not t.mutating)
    ]


def short_function(tool: ToolSpec) -> dict[str, Any]:
    """A tool as a chat-completions function: its first sentence and its bare schema."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": first_sentence(tool.description),
            "parameters": bare_schema(tool.input_schema),
        },
    }


def first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def bare_schema(schema: Any) -> Any:
    """A JSON schema without its descriptions, titles and examples."""
    if isinstance(schema, dict):
        return {
            k: bare_schema(v)
            for k, v in schema.items()
            if k not in ("description", "title", "examples")
        }
    if isinstance(schema, list):
        return [bare_schema(v) for v in schema]
    return schema
