"""The run as it was: the brain and limits a resumed investigation is rebuilt with.

```python
brain, notes = rebuild_brain(start, settings, BrainOverrides(base_url="http://gpu2:8000/v1"))
settings, more = recorded_limits(start, settings)     # the tool limits and budget recorded
```

`session_started` records the provider, model and `brain_options` (endpoint, max_tokens,
tool_choice, temperature, attempts, seed, the served context the probe read). The recorded
value wins over today's sleuth.toml and environment; a flag given to `sleuth resume` wins over
the recorded value. Each difference is a note that says which was used. The served context
is the server's own limit: the probe reads it again and a change is noted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sleuth.agent.brains.anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicBrain
from sleuth.agent.brains.openai import OpenAIBrain
from sleuth.agent.protocols import Brain
from sleuth.config import Budget, Limits, Settings, ToolChoice
from sleuth.transcripts.events import BrainOptions, SessionStarted


class ResumeError(Exception):
    """The transcript cannot be continued; the message says why and what to do."""


@dataclass(frozen=True)
class BrainOverrides:
    """`sleuth resume` flags: each one given wins over the recorded value."""

    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    tool_choice: ToolChoice | None = None


@dataclass(frozen=True)
class _Option:
    name: str
    recorded: Any
    flag: str
    given: Any
    """The flag's value, None when not given."""
    today: Any
    source: str
    """Where today's value comes from: sleuth.toml, an environment variable, the default."""

    def choose(self, notes: list[str]) -> Any:
        if self.given is not None:
            if self.given != self.recorded:
                notes.append(
                    f"{self.name}: recorded {self.recorded}, {self.flag} {self.given}: using "
                    f"{self.given} (your flag)"
                )
            return self.given
        if self.recorded is None:
            return self.today
        if self.today is not None and self.today != self.recorded:
            notes.append(
                f"{self.name}: recorded {self.recorded}, {self.source} says {self.today}: "
                f"using the recorded {self.recorded} (pass {self.flag} {self.today} to use it)"
            )
        return self.recorded


def rebuild_brain(
    start: SessionStarted,
    settings: Settings,
    overrides: BrainOverrides | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Brain, list[str]]:
    """The brain that ran the session, built again (model brains need their keys from `env`),
    and a note for each option where today's settings or the flags differ from the record."""
    env = os.environ if env is None else env
    given = overrides or BrainOverrides()
    if start.brain == "playbook":
        from sleuth.agent.playbook.brain import PlaybookBrain

        return PlaybookBrain(), []
    if start.brain not in ("anthropic", "openai"):
        raise ResumeError(
            f"a {start.brain!r} session cannot be resumed; replay it with `sleuth replay`"
        )
    recorded = start.brain_options or _unrecorded(start, env)
    notes: list[str] = []
    cfg = settings.brain
    url_env = "OPENAI_BASE_URL" if start.brain == "openai" else "ANTHROPIC_BASE_URL"
    url_today = (cfg.base_url if start.brain == "openai" else None) or env.get(url_env)
    url_source = "sleuth.toml [brain] base_url" if cfg.base_url else url_env
    model = _Option("model", start.model, "--model", given.model, cfg.model, "sleuth.toml")
    endpoint = _Option(
        "endpoint", recorded.endpoint, "--base-url", given.base_url, url_today, url_source
    )
    tokens = _Option(
        "max_tokens",
        recorded.max_tokens,
        "--max-tokens",
        given.max_tokens,
        cfg.max_tokens,
        "sleuth.toml" if "max_tokens" in cfg.model_fields_set else "the default",
    )
    choice = _Option(
        "tool_choice", recorded.tool_choice, "--tool-choice", given.tool_choice,
        cfg.tool_choice, "sleuth.toml",
    )  # fmt: skip
    options = recorded.model_copy(
        update={
            "endpoint": endpoint.choose(notes),
            "max_tokens": tokens.choose(notes),
            "tool_choice": choice.choose(notes) if start.brain == "openai" else None,
            "attempts": recorded.attempts or cfg.attempts,
        }
    )
    brain = _build(start.brain, model.choose(notes), options, env)
    if isinstance(brain, OpenAIBrain):
        brain.probe()  # the served context is the server's to say; a usage error if gone
        if recorded.context_window and brain.context_window != recorded.context_window:
            notes.append(
                f"served context: recorded {recorded.context_window:,} tokens, the server now "
                f"serves {brain.context_window or 0:,}: the server's own limit is used"
            )
    return brain, notes


def _unrecorded(start: SessionStarted, env: Mapping[str, str]) -> BrainOptions:
    """A transcript from before brain options were recorded: today's environment."""
    name = "OPENAI_BASE_URL" if start.brain == "openai" else "ANTHROPIC_BASE_URL"
    return BrainOptions(endpoint=env.get(name))


def _build(
    provider: str, model: str | None, options: BrainOptions, env: Mapping[str, str]
) -> Brain:
    tokens, attempts = options.max_tokens or 4096, options.attempts or 3
    if provider == "anthropic":
        if not env.get("ANTHROPIC_API_KEY"):
            raise ResumeError(
                f"the session used Anthropic ({model}); export ANTHROPIC_API_KEY to resume it"
            )
        return AnthropicBrain(
            model or DEFAULT_ANTHROPIC_MODEL,
            api_key=env["ANTHROPIC_API_KEY"],
            base_url=options.endpoint,
            max_tokens=tokens,
            temperature=options.temperature,
            attempts=attempts,
        )
    if not options.endpoint or not model:
        raise ResumeError(
            f"the session used an OpenAI-compatible endpoint ({model}); pass --base-url "
            "(or export OPENAI_BASE_URL, and OPENAI_API_KEY if it needs one) to resume it"
        )
    return OpenAIBrain(
        model,
        base_url=options.endpoint,
        api_key=env.get("OPENAI_API_KEY"),
        max_tokens=tokens,
        temperature=options.temperature,
        attempts=attempts,
        tool_choice=options.tool_choice,
        context_window=options.context_window,
        seed=options.seed,
    )


def recorded_limits(start: SessionStarted, settings: Settings) -> tuple[Settings, list[str]]:
    """Settings whose tool limits and budget are the recorded ones, and a note for each that
    today's sleuth.toml sets otherwise."""
    notes: list[str] = []
    update: dict[str, Any] = {}
    for name, model, recorded in (
        ("limits", Limits, start.policy.get("limits")),
        ("budget", Budget, start.budget),
    ):
        try:
            chosen = model.model_validate(recorded)
        except ValidationError:
            continue  # nothing recorded, or not readable: today's settings stand
        today = getattr(settings, name)
        for field in today.model_fields_set:
            was, now = getattr(chosen, field), getattr(today, field)
            if was != now:
                notes.append(
                    f"{name}.{field}: recorded {was}, sleuth.toml says {now}: using the "
                    "recorded value"
                )
        update[name] = chosen
    return settings.model_copy(update=update), notes
