"""Any OpenAI-compatible /chat/completions endpoint with function calling, over plain HTTP.

```python
brain = OpenAIBrain("Qwen/Qwen3-8B", base_url="http://gpu1:8000/v1")
brain.probe()                                   # the served model and its context
reply = brain.complete(Request(system, messages, tools))
```
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import httpx2

from sleuth.agent.brains.chat import chat_function, from_chat_completion, to_chat_messages
from sleuth.agent.brains.fitting import (
    COMPACT_BELOW,
    MIN_ROOM,
    WANTED_ROOM,
    prompt_chars,
    prompt_tokens,
)
from sleuth.agent.brains.prompt import system_prompt
from sleuth.agent.brains.request import MAX_OUTPUT_TOKENS, raised_limit, request_hash
from sleuth.agent.brains.retry import AttemptLog, with_retries
from sleuth.agent.compact import family_tools, short_function
from sleuth.agent.evidence.lines import shown_conversation
from sleuth.agent.protocols import BrainError, BrainReply, Request
from sleuth.config import ToolChoice
from sleuth.transcripts.redact import register_secret

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIBrain:
    """Any OpenAI-compatible /chat/completions endpoint with function calling.

    `probe()` reads the server's `/models`: a model it does not serve is a usage error, and the
    served context (`max_model_len` on vLLM and SGLang) fits each request's `max_tokens` and
    picks the compact prompt when the context is small.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
        attempts: int = 3,
        timeout_s: float = 300.0,
        tool_choice: ToolChoice | None = None,
        context_window: int | None = None,
        seed: int | None = None,
    ) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            register_secret(key)
        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.attempts, self.tool_choice = attempts, tool_choice
        # Sampling seed: vLLM and SGLang honour it, so a sampled run can be reproduced.
        self.seed = seed
        self.endpoint = url.rstrip("/")
        self.url = self.endpoint + "/chat/completions"
        self.context_window = context_window
        self._counted: tuple[int, int] | None = None
        """(prompt characters, the server's prompt tokens) of the last request it answered."""
        # OpenAI's own API refuses max_tokens for its current models (gpt-5, o-series) and wants
        # max_completion_tokens; servers such as vLLM, SGLang and llama.cpp all take max_tokens.
        self.limit_key = "max_completion_tokens" if self.endpoint == OPENAI_URL else "max_tokens"
        self._log = AttemptLog()
        self.client = self._log.client(timeout_s)
        if key:
            self.client.headers["authorization"] = f"Bearer {key}"

    @property
    def compact(self) -> bool:
        return self.context_window is not None and self.context_window < COMPACT_BELOW

    def probe(self, timeout_s: float = 10.0) -> None:
        """Read `/models` once. An unreachable server is left to the first turn, which retries
        and then says why; a list without this model is an error before any turn."""
        try:
            response = self.client.get(self.endpoint + "/models", timeout=timeout_s)
            listed = response.json()["data"] if response.status_code == 200 else []
        except (httpx2.HTTPError, ValueError, KeyError, TypeError):
            return
        entries = [m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
        mine = next((m for m in entries if m["id"] == self.model), None)
        if mine is None and entries:
            names = ", ".join(m["id"] for m in entries[:10])
            raise BrainError(
                f"{self.endpoint} does not serve model {self.model!r}; it serves: {names}. "
                "Pass --model with one of these (or point --base-url at the server that has it)",
                kind="usage",
            )
        length = (mine or {}).get("max_model_len")
        if isinstance(length, int) and length > 0:
            self.context_window = length

    def body(
        self, request: Request, max_tokens: int | None = None, readers_only: bool = False
    ) -> dict[str, Any]:
        tools = (
            [short_function(t) for t in family_tools(request.tools, request.question, readers_only)]
            if self.compact
            else [chat_function(t) for t in request.tools]
        )
        system = system_prompt(compact=True) if self.compact else request.system
        body: dict[str, Any] = {
            "model": self.model,
            self.limit_key: max_tokens or self.max_tokens,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            **({"seed": self.seed} if self.seed is not None else {}),
            "messages": [
                {"role": "system", "content": system},
                *to_chat_messages(shown_conversation(request.messages)),
            ],
            "tools": tools,
        }
        choice = self._tool_choice(request)
        if choice and tools:
            body["tool_choice"] = choice
        return body

    def _tool_choice(self, request: Request) -> ToolChoice | None:
        """`required` holds on the first turn only, so a small model starts by looking, and
        can still end with a plain answer later."""
        if self.tool_choice != "required":
            return self.tool_choice
        first = not any(m["role"] == "assistant" for m in request.messages)
        return "required" if first else "auto"

    def fit(self, request: Request) -> dict[str, Any]:
        """The request body with max_tokens fitted to the room the served context leaves."""
        limit = raised_limit(self.max_tokens, request, MAX_OUTPUT_TOKENS)
        body = self.body(request, limit)
        if self.context_window is None:
            return body
        prompt = self.prompt_tokens(body)
        if self.compact and self.context_window - prompt < WANTED_ROOM:
            # Measured on SmolLM2 at a 2,048-token context: every read-only tool's schema
            # (~2,400 tokens) left no room at all; the readers alone (~1,300) leave ~700.
            body = self.body(request, limit, readers_only=True)
            prompt = self.prompt_tokens(body)
        room = self.context_window - prompt
        if room < MIN_ROOM:
            raise BrainError(
                f"the conversation (about {prompt:,} tokens) no longer leaves room to answer in "
                f"the {self.context_window:,}-token context {self.endpoint} serves for "
                f"{self.model}. Fix: serve the model with a larger context (vLLM "
                "--max-model-len, SGLang --context-length)",
                kind="context",
            )
        body[self.limit_key] = min(limit, room)
        return body

    def prompt_tokens(self, body: Mapping[str, Any]) -> int:
        """The prompt's tokens, estimated on the high side; once the server has counted a
        prompt of this conversation, that count stands (see `fitting.prompt_tokens`)."""
        return prompt_tokens(prompt_chars(body), self._counted)

    def complete(self, request: Request) -> BrainReply:
        body = self.fit(request)
        self._log.begin(request.on_retry)
        start = time.monotonic()
        data = with_retries(
            lambda: self._post(body),
            self.attempts,
            request.deadline,
            f"POST {self.url}",
            "OPENAI_API_KEY",
        )
        try:
            response, usage = from_chat_completion(data)
        except (KeyError, IndexError, TypeError) as exc:
            raise BrainError(
                f"{self.url} answered without a chat completion: {exc!r}", kind="protocol"
            ) from exc
        if usage.input_tokens > 0:
            self._counted = (prompt_chars(body), usage.input_tokens + usage.cache_read_tokens)
        return BrainReply(
            response=response,
            usage=usage,
            latency_s=time.monotonic() - start,
            retries=list(self._log.retries),
            request_hash=request_hash(body),
        )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(self.url, json=body)
        response.raise_for_status()
        try:
            data = response.json()
        except ValueError as exc:
            raise BrainError(
                f"{self.url} answered with invalid JSON: {response.text[:200]!r}", kind="protocol"
            ) from exc
        if not isinstance(data, dict):
            raise BrainError(f"{self.url} answered with JSON that is not an object", "protocol")
        return data
