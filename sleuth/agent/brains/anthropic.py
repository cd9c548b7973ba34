"""Claude through Anthropic's official SDK: prompt caching, parallel tool use, one retry layer.

```python
brain = AnthropicBrain("claude-sonnet-5-5")          # ANTHROPIC_API_KEY set
reply = brain.complete(Request(system, messages, tools))
```

The SDK is imported when a brain is made, never with this module: it takes seconds to
import, and a command that uses no Anthropic model must not pay for it.
"""

from __future__ import annotations

import copy
import inspect
import os
import time
from typing import TYPE_CHECKING, Any

from sleuth.agent.brains.request import MAX_OUTPUT_TOKENS, raised_limit, request_hash
from sleuth.agent.brains.retry import AttemptLog, with_retries
from sleuth.agent.evidence.lines import shown_conversation
from sleuth.agent.protocols import BrainError, BrainReply, Message, Request
from sleuth.transcripts.events import ContentBlock, ModelResponse, Usage
from sleuth.transcripts.redact import register_secret

if TYPE_CHECKING:
    import anthropic

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
EPHEMERAL = {"type": "ephemeral"}


class AnthropicBrain:
    """Claude through the official SDK, with prompt caching and parallel tool use."""

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
        attempts: int = 3,
        timeout_s: float = 300.0,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise BrainError(
                "ANTHROPIC_API_KEY is not set; export it, or pick another brain with "
                "--provider openai|playbook",
                kind="usage",
            )
        register_secret(key)
        import anthropic

        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.attempts = attempts
        self.context_window: int | None = None
        self._log = AttemptLog()
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # tenacity is the one retry layer; the SDK's would multiply it
            http_client=self._log.client(timeout_s),
        )
        self.endpoint = str(self.client.base_url).rstrip("/")

    def body(self, request: Request, max_tokens: int | None = None) -> dict[str, Any]:
        """The exact request: breakpoints on the last tool, the system prompt and the tail; tool
        outputs with their lines numbered, as evidence cites them."""
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if tools:
            tools[-1]["cache_control"] = EPHEMERAL
        return {
            "model": self.model,
            "max_tokens": max_tokens or self.max_tokens,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            "system": [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}],
            "tools": tools,
            "messages": _tail_breakpoint(shown_conversation(request.messages)),
        }

    def needs_streaming(self, max_tokens: int) -> bool:
        """The SDK refuses a non-streaming request it expects to run past 10 minutes (by
        max_tokens, and per model); its own rule decides, so the two never disagree."""
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS

        try:
            self.client._calculate_nonstreaming_timeout(
                max_tokens, MODEL_NONSTREAMING_TOKENS.get(self.model)
            )
        except ValueError:
            return True
        return False

    def complete(self, request: Request) -> BrainReply:
        body = self.body(request, raised_limit(self.max_tokens, request, MAX_OUTPUT_TOKENS))
        stream = self.needs_streaming(body["max_tokens"])
        self._log.begin(request.on_retry)
        start = time.monotonic()
        message = with_retries(
            lambda: self._send(body, stream),
            self.attempts,
            request.deadline,
            f"Anthropic Messages API at {self.endpoint}",
            "ANTHROPIC_API_KEY",
        )
        usage = message.usage
        return BrainReply(
            response=ModelResponse(
                content=[
                    ContentBlock.model_validate(b.model_dump())
                    for b in message.content
                    if b.type in ("text", "tool_use", "thinking", "redacted_thinking")
                ],
                stop_reason=message.stop_reason,
                model=message.model,
            ),
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            latency_s=time.monotonic() - start,
            retries=list(self._log.retries),
            request_hash=request_hash(body),
        )

    def _send(self, body: dict[str, Any], stream: bool) -> anthropic.types.Message:
        method = self.client.messages.stream if stream else self.client.messages.create
        # Fields this SDK release has no parameter for (temperature, in some) go in extra_body,
        # so the wire request is the same whichever release is installed.
        known = inspect.signature(method).parameters
        extra = {k: v for k, v in body.items() if k not in known}
        params = {k: v for k, v in body.items() if k in known}
        try:
            if stream:
                with self.client.messages.stream(**params, extra_body=extra or None) as events:
                    final: anthropic.types.Message = events.get_final_message()
                    return final
            message: anthropic.types.Message = self.client.messages.create(
                **params, extra_body=extra or None
            )
        except ValueError as exc:  # the SDK's parse of a body that is not a Messages response
            raise BrainError(
                f"{self.endpoint} answered with something that is not a Messages API "
                f"response ({exc}); check ANTHROPIC_BASE_URL",
                kind="protocol",
            ) from exc
        return message


def _tail_breakpoint(messages: list[Message]) -> list[Message]:
    """A copy of the conversation with a cache breakpoint on its last block.

    The breakpoint moves with the tail each turn, so the next turn reads
    everything before it from the cache; the stored conversation is not touched.
    """
    out = list(messages)
    if not out:
        return out
    last = copy.deepcopy(out[-1])
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = EPHEMERAL
    out[-1] = last
    return out
