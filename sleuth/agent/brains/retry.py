"""The one retry layer, shared by the providers, and the words a failed request ends with.

The SDK's own retries are off, and tenacity retries a turn on overload (529), rate
limits (429), 408/409, other 5xx and dropped connections, honouring `retry-after`,
for at most `attempts` requests and never past the wall-time budget. An event hook
on the HTTP client sees every attempt, so each retry shows in the view and the
transcript. A request that fails for good ends with the provider's own error
message and the setting to change.

```python
log = AttemptLog()
client = log.client(timeout_s)              # every request through it is counted
log.begin(request.on_retry)
reply = with_retries(send, attempts, request.deadline, "POST URL", "OPENAI_API_KEY")
```
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2  # the HTTP client the anthropic SDK ships with; no extra dependency
from tenacity import RetryCallState, Retrying, retry_if_exception

from sleuth.agent.protocols import BrainError
from sleuth.transcripts.events import Retry

MAX_RETRY_AFTER_S = 60.0
T = TypeVar("T")


class AttemptLog:
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


def with_retries(
    call: Callable[[], T], attempts: int, deadline: float | None, what: str, key_var: str
) -> T:
    """`call()`, retried as the module says; a failure for good is a BrainError naming `what`
    failed, the server's words and the setting (`key_var` for a refused key) to change."""

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
