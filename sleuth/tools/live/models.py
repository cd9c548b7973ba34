"""What the live tools return, as data: figures that each name the series they came from."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Figure(BaseModel):
    """One number and where it came from, so a finding can quote both."""

    name: str
    """e.g. generation_tokens_per_s, kv_usage_max, spec_mean_accept_length."""
    value: float | None
    unit: str = ""
    series: list[str] = Field(default_factory=list)
    """The metric series (or log fields) it was computed from, as the engine names them."""
    how: str = ""
    """How: "rate over 10.01 s", "max of 11 samples", "1 + accepted/drafts over the window"."""


class Settings(BaseModel):
    """The effective settings an engine reports about itself."""

    source: str
    """Where they were read: /get_server_info, /v1/models + cache_config_info, argv."""
    values: dict[str, Any] = Field(default_factory=dict)


class EngineReport(BaseModel):
    """One engine answering on a host port."""

    host: str
    port: int
    engine: str | None
    """sglang, vllm, or None when what answers is not recognised."""
    version: str | None = None
    healthy: bool | None = None
    health: str = ""
    models: list[str] = Field(default_factory=list)
    max_model_len: dict[str, int] = Field(default_factory=dict)
    settings: list[Settings] = Field(default_factory=list)
    pid: int | None = None
    argv: list[str] | None = None
    metrics_available: bool = False
    metrics_note: str = ""
    now: list[Figure] = Field(default_factory=list)
    """Gauges read once, and counters since the engine started (said so in `how`)."""
    window_s: float | None = None
    window_start: float | None = None
    """The host's clock (unix seconds) at the window's first /metrics read; its end is
    window_start + window_s."""
    window: list[Figure] = Field(default_factory=list)
    """Rates and gauge max/mean over the window, when one was asked for."""
    problems: list[str] = Field(default_factory=list)


class EngineStatus(BaseModel):
    host: str
    engines: list[EngineReport]
    listening_ports: list[int] = Field(default_factory=list)
    """Without a port: the TCP ports the host listens on (for a person to pick from)."""
