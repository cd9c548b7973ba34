"""The chat-completions wire format: the conversation out, a model response back.

The loop keeps the conversation in the Messages API's shape; these map it onto
OpenAI-compatible `/chat/completions` messages and functions, and map the answer
(tool calls, finish reason, usage) back into `ModelResponse` blocks and `Usage`.
"""

from __future__ import annotations

import json
from typing import Any

from sleuth.agent.protocols import UNPARSED, Message
from sleuth.transcripts.events import ContentBlock, ModelResponse, ToolSpec, Usage


def chat_function(tool: ToolSpec) -> dict[str, Any]:
    """A tool as a chat-completions function, with its whole description and schema."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def to_chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages-API turns as chat-completions messages (tool results become role=tool)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
        if m["role"] == "assistant":
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {
                        "name": b["name"],
                        "arguments": b["input"][UNPARSED]
                        if set(b["input"]) == {UNPARSED}
                        else json.dumps(b["input"]),
                    },
                }
                for b in blocks
                if b["type"] == "tool_use"
            ]
            out.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    **({"tool_calls": calls} if calls else {}),
                }
            )
            continue
        out.extend(
            {"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]}
            for b in blocks
            if b["type"] == "tool_result"
        )
        if text:
            out.append({"role": "user", "content": text})
    return out


# finish_reason -> the Messages API's stop_reason, so the loop handles one vocabulary.
_STOP = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def from_chat_completion(data: dict[str, Any]) -> tuple[ModelResponse, Usage]:
    choice = data["choices"][0]
    message = choice["message"]
    content = [ContentBlock(type="text", text=message["content"])] if message.get("content") else []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw or {}
        except ValueError:
            args = None
        if not isinstance(args, dict):
            # Kept as sent, so the loop can tell the model its arguments were not a JSON object.
            args = {UNPARSED: raw if isinstance(raw, str) else json.dumps(raw)}
        content.append(
            ContentBlock(
                type="tool_use",
                id=str(call.get("id") or f"call_{i}"),
                name=str(function.get("name") or ""),
                input=args,
            )
        )
    reason = choice.get("finish_reason") or ""
    stop = _STOP.get(reason, reason or None)
    # Servers differ on the reason for a turn with calls under tool_choice=required ("stop").
    if stop == "end_turn" and any(b.type == "tool_use" for b in content):
        stop = "tool_use"
    usage = data.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return (
        ModelResponse(content=content, stop_reason=stop, model=data.get("model")),
        Usage(
            input_tokens=(usage.get("prompt_tokens") or 0) - cached,
            output_tokens=usage.get("completion_tokens") or 0,
            cache_read_tokens=cached,
        ),
    )
