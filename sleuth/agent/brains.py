"""Brains backed by a language model: Anthropic's Messages API and OpenAI-compatible chat.

```python
brain = select_brain(settings, base_url=None, model=None)   # ANTHROPIC_API_KEY set
reply = brain.complete(Request(system, messages, tools))
```

Both retry a turn on overload (529), rate limits (429), 5xx and dropped
connections, honouring `retry-after`. Every HTTP attempt after the first is
seen by an event hook on the HTTP client, so retries made inside the SDK show
in the view and the transcript just like the ones made here.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2  # the HTTP client the anthropic SDK ships with; no extra dependency
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from sleuth.agent.protocols import Brain, BrainError, BrainReply, Message, Request
from sleuth.config import Settings
from sleuth.transcripts.events import ContentBlock, ModelResponse, Retry, ToolSpec, Usage
from sleuth.transcripts.redact import register_secret

if TYPE_CHECKING:
    import anthropic

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
EPHEMERAL = {"type": "ephemeral"}
MAX_RETRY_AFTER_S = 60.0
T = TypeVar("T")


def system_prompt() -> str:
    """The system prompt and the tool guidance, as shipped in sleuth/prompts/."""
    folder = resources.files("sleuth") / "prompts"
    return "\n\n".join(
        (folder / name).read_text(encoding="utf-8") for name in ("system.md", "tools.md")
    )


def request_hash(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class _AttemptLog:
    """Counts HTTP attempts of one turn; each one after the first is a retry, with its cause."""

    def __init__(self) -> None:
        self.begin(lambda retry: None)

    def begin(self, on_retry: Callable[[Retry], None]) -> None:
        self.on_retry = on_retry
        self.retries: list[Retry] = []
        self.sent, self.cause, self.last = 0, "", time.monotonic()

    def on_request(self, request: httpx2.Request) -> None:
        now = time.monotonic()
        if self.sent:
            retry = Retry(
                attempt=self.sent,
                reason=self.cause or "connection error",
                wait_s=round(now - self.last, 3),
            )
            self.retries.append(retry)
            self.on_retry(retry)
        self.sent, self.cause, self.last = self.sent + 1, "", now

    def on_response(self, response: httpx2.Response) -> None:
        self.last = time.monotonic()
        if response.status_code >= 400:
            after = response.headers.get("retry-after")
            self.cause = f"HTTP {response.status_code}" + (
                f", retry-after {after}" if after else ""
            )

    def client(self, timeout: float) -> httpx2.Client:
        hooks: dict[str, list[Callable[..., Any]]] = {
            "request": [self.on_request],
            "response": [self.on_response],
        }
        return httpx2.Client(timeout=timeout, event_hooks=hooks)


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _sdk_errors() -> tuple[type[Exception], type[Exception]]:
    """The SDK's (APIError, APIConnectionError). The SDK is imported only when a run uses it:
    it takes seconds to import, and most commands never need it."""
    if "anthropic" not in sys.modules:
        return httpx2.HTTPError, httpx2.TransportError
    import anthropic

    return anthropic.APIError, anthropic.APIConnectionError


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _sdk_errors()[1] | httpx2.TransportError):
        return True
    status = _status(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def _wait(state: RetryCallState) -> float:
    """retry-after (seconds) when the server sent one, else 0.5, 1, 2... capped at 8 s."""
    exc = state.outcome.exception() if state.outcome else None
    response = getattr(exc, "response", None)
    after = response.headers.get("retry-after") if response is not None else None
    try:
        return (
            min(float(after), MAX_RETRY_AFTER_S)
            if after
            else min(0.5 * 2.0 ** (state.attempt_number - 1), 8.0)
        )
    except ValueError:
        return 1.0


def _with_retries(call: Callable[[], T], attempts: int, what: str) -> T:
    retrying = Retrying(
        retry=retry_if_exception(_retryable),
        wait=_wait,
        stop=stop_after_attempt(attempts),
        reraise=True,
    )
    try:
        return retrying(call)
    except (_sdk_errors()[0], httpx2.HTTPError) as exc:
        status = _status(exc)
        why = f"HTTP {status}" if status else type(exc).__name__
        raise BrainError(f"{what} failed after retries ({why}): {exc}") from exc


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
        sdk_retries: int = 2,
        attempts: int = 3,
        timeout_s: float = 300.0,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise BrainError(
                "ANTHROPIC_API_KEY is not set; export it or pass --base-url for an "
                "OpenAI-compatible endpoint"
            )
        register_secret(key)
        import anthropic

        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.attempts = attempts
        self._log = _AttemptLog()
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url,
            max_retries=sdk_retries,
            http_client=self._log.client(timeout_s),
        )

    def body(self, request: Request) -> dict[str, Any]:
        """The exact request: breakpoints on the last tool, the system prompt and the tail."""
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if tools:
            tools[-1]["cache_control"] = EPHEMERAL
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            "system": [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}],
            "tools": tools,
            "messages": _tail_breakpoint(request.messages),
        }

    def complete(self, request: Request) -> BrainReply:
        body = self.body(request)
        self._log.begin(request.on_retry)
        start = time.monotonic()
        try:
            message = _with_retries(
                lambda: self._send(body),
                self.attempts,
                f"Anthropic Messages API at {self.client.base_url}",
            )
        except ValueError as exc:
            raise BrainError(
                f"{self.client.base_url} answered with something that is not a Messages API "
                f"response ({exc}); check ANTHROPIC_BASE_URL"
            ) from exc
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

    def _send(self, body: dict[str, Any]) -> anthropic.types.Message:
        # Fields this SDK release has no parameter for (temperature, in some) go in extra_body,
        # so the wire request is the same whichever release is installed.
        known = inspect.signature(self.client.messages.create).parameters
        extra = {k: v for k, v in body.items() if k not in known}
        params = {k: v for k, v in body.items() if k in known}
        message: anthropic.types.Message = self.client.messages.create(
            **params, extra_body=extra or None
        )
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


class OpenAIBrain:
    """Any OpenAI-compatible /chat/completions endpoint with function calling."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
        attempts: int = 5,
        timeout_s: float = 300.0,
    ) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            register_secret(key)
        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.attempts, self.url = attempts, url.rstrip("/") + "/chat/completions"
        self._log = _AttemptLog()
        self.client = self._log.client(timeout_s)
        if key:
            self.client.headers["authorization"] = f"Bearer {key}"

    def body(self, request: Request) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            "messages": [
                {"role": "system", "content": request.system},
                *to_chat_messages(request.messages),
            ],
            "tools": [_function(t) for t in request.tools],
        }

    def complete(self, request: Request) -> BrainReply:
        body = self.body(request)
        self._log.begin(request.on_retry)
        start = time.monotonic()
        data = _with_retries(lambda: self._post(body), self.attempts, f"POST {self.url}")
        try:
            response, usage = from_chat_completion(data)
        except (KeyError, IndexError, TypeError) as exc:
            raise BrainError(f"{self.url} answered without a chat completion: {exc!r}") from exc
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
                f"{self.url} answered with invalid JSON: {response.text[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise BrainError(f"{self.url} answered with JSON that is not an object")
        return data


def _function(tool: ToolSpec) -> dict[str, Any]:
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
                    "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
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


_STOP = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}


def from_chat_completion(data: dict[str, Any]) -> tuple[ModelResponse, Usage]:
    choice = data["choices"][0]
    message = choice["message"]
    content = [ContentBlock(type="text", text=message["content"])] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        raw = call["function"].get("arguments") or "{}"
        try:
            args = json.loads(raw)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            # Passed on as-is so the tool's validation tells the model what was wrong.
            args = {"unparsed_arguments": raw}
        content.append(
            ContentBlock(type="tool_use", id=call["id"], name=call["function"]["name"], input=args)
        )
    usage = data.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return (
        ModelResponse(
            content=content,
            stop_reason=_STOP.get(choice.get("finish_reason") or "", choice.get("finish_reason")),
            model=data.get("model"),
        ),
        Usage(
            input_tokens=(usage.get("prompt_tokens") or 0) - cached,
            output_tokens=usage.get("completion_tokens") or 0,
            cache_read_tokens=cached,
        ),
    )


def select_brain(
    settings: Settings,
    base_url: str | None = None,
    model: str | None = None,
    *,
    max_tokens: int = 4096,
    temperature: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Brain:
    """--base-url picks the OpenAI-compatible brain; else ANTHROPIC_API_KEY picks Claude.

    With neither, `offline_brain` answers: the playbook brain's hook.
    """
    env = os.environ if env is None else env
    if base_url or (env.get("OPENAI_BASE_URL") and not env.get("ANTHROPIC_API_KEY")):
        if not model:
            raise BrainError(
                "--model is required with --base-url: name the model the endpoint "
                "serves (e.g. --model Qwen/Qwen3-8B)"
            )
        return OpenAIBrain(model, base_url=base_url, max_tokens=max_tokens, temperature=temperature)
    if env.get("ANTHROPIC_API_KEY"):
        return AnthropicBrain(
            model or DEFAULT_ANTHROPIC_MODEL,
            api_key=env["ANTHROPIC_API_KEY"],
            base_url=env.get("ANTHROPIC_BASE_URL"),
            max_tokens=max_tokens,
            temperature=temperature,
        )
    return offline_brain(settings)


def offline_brain(settings: Settings) -> Brain:
    """The brain used with no model configured: the offline playbook."""
    from sleuth.agent.playbooks import PlaybookBrain

    return PlaybookBrain()
