"""Which brain runs: the flags, sleuth.toml's [brain] and the environment decide.

```python
brain = select_brain(settings, provider=None, model=None)   # ANTHROPIC_API_KEY set
print(describe_brain(brain))
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sleuth.agent.brains.anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicBrain
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.protocols import Brain, BrainError
from sleuth.config import Provider, Settings, ToolChoice


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
    from sleuth.agent.playbook.brain import PlaybookBrain

    return PlaybookBrain()
