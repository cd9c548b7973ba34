"""Brains backed by a language model: Anthropic's Messages API and OpenAI-compatible chat.

```python
brain = select_brain(settings, provider=None, model=None)   # ANTHROPIC_API_KEY set
reply = brain.complete(Request(system, messages, tools))
```

One retry layer: the SDK's own retries are off, and tenacity retries a turn on
overload (529), rate limits (429), 408/409, other 5xx and dropped connections,
honouring `retry-after`, for at most `attempts` requests and never past the
wall-time budget. An event hook on the HTTP client sees every attempt, so each
retry shows in the view and the transcript. A request that fails for good
ends with the provider's own error message and the setting to change.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import httpx2  # the HTTP client the anthropic SDK ships with; no extra dependency
from tenacity import RetryCallState, Retrying, retry_if_exception

from sleuth.agent.compact import family_tools, short_function
from sleuth.agent.protocols import UNPARSED, Brain, BrainError, BrainReply, Message, Request
from sleuth.config import Provider, Settings, ToolChoice
from sleuth.transcripts.events import ContentBlock, ModelResponse, Retry, ToolSpec, Usage
from sleuth.transcripts.redact import register_secret

if TYPE_CHECKING:
    import anthropic

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
OPENAI_URL = "https://api.openai.com/v1"
EPHEMERAL = {"type": "ephemeral"}
MAX_RETRY_AFTER_S = 60.0
MAX_OUTPUT_TOKENS = 64_000
"""The most a raised per-turn limit asks for: the largest output current models allow."""
COMPACT_BELOW = 16_384
"""A served context (tokens) below this gets the compact prompt: the full one is ~6k tokens."""
T = TypeVar("T")


def system_prompt(compact: bool = False) -> str:
    """The system prompt and the tool guidance, as shipped in sleuth/prompts/."""
    folder = resources.files("sleuth") / "prompts"
    names = ("compact.md",) if compact else ("system.md", "tools.md")
    return "\n\n".join((folder / name).read_text(encoding="utf-8") for name in names)


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


def provider_message(exc: BaseException) -> str:
    """The server's own words from an HTTP error's JSON body: Anthropic's and OpenAI's
    `{"error": {"message": ...}}`, vLLM's and SGLang's `{"message": ...}`; else the body text."""
    response = getattr(exc, "response", None)
    if response is None:
        return str(exc) or type(exc).__name__
    try:
        body = response.json()
    except (ValueError, httpx2.HTTPError):
        return response.text.strip()[:500] if hasattr(response, "text") else str(exc)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    return json.dumps(body)[:500]


def _advice(status: int | None, key_var: str) -> str:
    """The setting to change for an HTTP status, said for a person."""
    if status in (400, 413, 422):
        return (
            "Fix: check --model and --max-tokens (or [brain] in sleuth.toml) against the "
            "server's limits (vLLM --max-model-len, SGLang --context-length)."
        )
    if status in (401, 403):
        return f"Fix: check {key_var}: the server did not accept it."
    if status == 404:
        return "Fix: check --base-url (it ends in /v1 for OpenAI-compatible servers) and --model."
    if status is None:
        return (
            "Fix: no HTTP answer came back: check the URL (--base-url, OPENAI_BASE_URL or "
            "ANTHROPIC_BASE_URL) and that the server is up and reachable from here."
        )
    return (
        "Fix: the server is overloaded or failing; try again later, or raise [brain] attempts "
        "in sleuth.toml."
    )


def _with_retries(
    call: Callable[[], T], attempts: int, deadline: float | None, what: str, key_var: str
) -> T:
    def stop(state: RetryCallState) -> bool:
        if state.attempt_number >= attempts:
            return True
        # The wall-time budget bounds retries too: no wait that would end past it.
        return deadline is not None and time.monotonic() + state.upcoming_sleep >= deadline

    retrying = Retrying(retry=retry_if_exception(_retryable), wait=_wait, stop=stop, reraise=True)
    try:
        return retrying(call)
    except (_sdk_errors()[0], httpx2.HTTPError) as exc:
        status = _status(exc)
        tries = retrying.statistics.get("attempt_number", 1)
        why = f"HTTP {status}" if status else type(exc).__name__
        raise BrainError(
            f"{what} failed after {tries} attempt{'s' if tries != 1 else ''} ({why}): "
            f"{provider_message(exc)}. {_advice(status, key_var)}"
        ) from exc


def _raised_limit(base: int, request: Request, ceiling: int) -> int:
    """This turn's output-token limit: doubled (once) after a cut-off reply, within the
    model's ceiling and what the output budget has left, never below the usual limit."""
    if not request.more_room:
        return base
    raised = min(base * 2, max(base, ceiling))
    if request.max_output is not None:
        raised = min(raised, max(base, request.max_output))
    return raised


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
        self._log = _AttemptLog()
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # tenacity is the one retry layer; the SDK's would multiply it
            http_client=self._log.client(timeout_s),
        )
        self.endpoint = str(self.client.base_url).rstrip("/")

    def body(self, request: Request, max_tokens: int | None = None) -> dict[str, Any]:
        """The exact request: breakpoints on the last tool, the system prompt and the tail."""
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
            "messages": _tail_breakpoint(request.messages),
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
        body = self.body(request, _raised_limit(self.max_tokens, request, MAX_OUTPUT_TOKENS))
        stream = self.needs_streaming(body["max_tokens"])
        self._log.begin(request.on_retry)
        start = time.monotonic()
        message = _with_retries(
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
        self._log = _AttemptLog()
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
            else [_function(t) for t in request.tools]
        )
        system = system_prompt(compact=True) if self.compact else request.system
        body: dict[str, Any] = {
            "model": self.model,
            self.limit_key: max_tokens or self.max_tokens,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            **({"seed": self.seed} if self.seed is not None else {}),
            "messages": [
                {"role": "system", "content": system},
                *to_chat_messages(request.messages),
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
        limit = _raised_limit(self.max_tokens, request, MAX_OUTPUT_TOKENS)
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
        """The prompt's tokens, estimated on the high side: tokenizers give 3.5-4.5 characters
        a token on this text, the chat template adds some. Once the server has counted a
        prompt of this conversation, that count stands and only what was added since is
        estimated: on SmolLM2 at a 2,048-token context the whole-prompt estimate (18% high)
        left no room for a second turn that fit."""
        chars = _prompt_chars(body)
        if self._counted is None or chars < self._counted[0]:
            return math.ceil(chars / CHARS_PER_TOKEN * 1.1) + 64
        counted_chars, counted_tokens = self._counted
        return counted_tokens + math.ceil((chars - counted_chars) / CHARS_PER_TOKEN * 1.1) + 16

    def complete(self, request: Request) -> BrainReply:
        body = self.fit(request)
        self._log.begin(request.on_retry)
        start = time.monotonic()
        data = _with_retries(
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
            self._counted = (_prompt_chars(body), usage.input_tokens + usage.cache_read_tokens)
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


CHARS_PER_TOKEN = 3.0
MIN_ROOM = 32
"""Fewer output tokens than this cannot hold a tool call: the context is full."""
WANTED_ROOM = 512
"""Room for a call or a short answer; with less, the compact prompt offers only the readers."""


def _prompt_chars(body: Mapping[str, Any]) -> int:
    return len(json.dumps(body["messages"], ensure_ascii=False)) + len(
        json.dumps(body.get("tools") or [], ensure_ascii=False)
    )


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


def select_brain(
    settings: Settings,
    *,
    provider: Provider | None = None,
    model: str | None = None,
    base_url: str | None = None,
    max_tokens: int | None = None,
    tool_choice: ToolChoice | None = None,
    temperature: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Brain:
    """The brain the flags, sleuth.toml's [brain] and the environment name, in that order.

    Without a provider: an Anthropic key picks anthropic, an OpenAI key or base URL picks
    openai (the official endpoint unless a base URL is given), neither picks the offline
    playbook. A model that no configured provider can serve is a usage error, never a quiet
    fall back to the playbook. Makes no request: `OpenAIBrain.probe()` is the first.
    """
    env = os.environ if env is None else env
    cfg = settings.brain
    model = model or cfg.model
    url = base_url or cfg.base_url or env.get("OPENAI_BASE_URL")
    anthropic_key = env.get("ANTHROPIC_API_KEY")
    openai_ready = bool(url or env.get("OPENAI_API_KEY"))
    provider = provider or cfg.provider or _infer(model, anthropic_key, openai_ready, env)
    limit = max_tokens or cfg.max_tokens
    if provider == "playbook":
        if model:
            raise BrainError(
                f"--model {model}: the playbook brain uses no language model. Drop --model, or "
                "pick --provider anthropic|openai",
                kind="usage",
            )
        return offline_brain(settings)
    if provider == "anthropic":
        return AnthropicBrain(
            model or DEFAULT_ANTHROPIC_MODEL,
            api_key=anthropic_key,
            base_url=env.get("ANTHROPIC_BASE_URL"),
            max_tokens=limit,
            temperature=temperature,
            attempts=cfg.attempts,
        )
    if not openai_ready:
        raise BrainError(
            "the openai brain needs OPENAI_API_KEY (for the official endpoint) or an "
            "OpenAI-compatible server: --base-url http://HOST:PORT/v1 or OPENAI_BASE_URL",
            kind="usage",
        )
    if not model:
        raise BrainError(
            "--model is required for an OpenAI-compatible endpoint: name the model it serves "
            "(e.g. --model Qwen/Qwen3-8B; `curl BASE_URL/models` lists them)",
            kind="usage",
        )
    return OpenAIBrain(
        model,
        base_url=url,
        api_key=env.get("OPENAI_API_KEY"),
        max_tokens=limit,
        temperature=temperature,
        attempts=cfg.attempts,
        tool_choice=tool_choice or cfg.tool_choice,
    )


def _infer(
    model: str | None, anthropic_key: str | None, openai_ready: bool, env: Mapping[str, str]
) -> Provider:
    if model is None:
        return "anthropic" if anthropic_key else "openai" if openai_ready else "playbook"
    # Anthropic's own endpoint serves only Claude; a gateway at ANTHROPIC_BASE_URL may serve more.
    anthropic_serves = bool(anthropic_key) and (
        model.startswith("claude") or bool(env.get("ANTHROPIC_BASE_URL"))
    )
    if anthropic_serves and not (openai_ready and not model.startswith("claude")):
        return "anthropic"
    if openai_ready:
        return "openai"
    configured = (
        "ANTHROPIC_API_KEY is set, and Anthropic serves claude-* models"
        if anthropic_key
        else "no model provider is configured"
    )
    raise BrainError(
        f"--model {model}: {configured}. Export OPENAI_API_KEY or pass --base-url "
        "http://HOST:PORT/v1 for an OpenAI-compatible server (or ANTHROPIC_API_KEY for a "
        "Claude model)",
        kind="usage",
    )


def describe_brain(brain: Brain) -> str:
    """The first status line: brain, model and endpoint (and the served context, if known)."""
    endpoint = getattr(brain, "endpoint", None)
    if brain.model is None:
        return f"brain {brain.name} (offline, no language model)"
    line = f"brain {brain.name} · model {brain.model} · endpoint {endpoint or '(none)'}"
    context = getattr(brain, "context_window", None)
    if context:
        line += f" · context {context:,} tokens"
    if getattr(brain, "compact", False):
        line += " (compact prompt)"
    return line


def offline_brain(settings: Settings) -> Brain:
    """The brain used with no model configured: the offline playbook."""
    from sleuth.agent.playbooks import PlaybookBrain

    return PlaybookBrain()
