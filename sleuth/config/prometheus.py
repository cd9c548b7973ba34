"""`[prometheus]` in sleuth.toml: where query_metrics asks for the engines' history."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PrometheusSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    """`[prometheus]`: the Prometheus that keeps the engines' history, for query_metrics. It is
    queried from where Sleuth runs, at the URL the operator wrote here (never a model's)."""

    url: str | None = None
    """e.g. http://prometheus.monitoring:9090; None: query_metrics says how to set it."""
    token_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding a bearer token. The token itself never goes in this
    file, a transcript, the terminal or the model."""
    timeout_s: float = Field(10.0, gt=0, le=300)
    max_points: int = Field(2_000, ge=10, le=100_000)
    """The most points per series a range query asks for: a finer step is raised to fit."""
    max_bytes: int = Field(4_000_000, ge=10_000, le=100_000_000)
    """The most bytes of one answer read; a longer one is refused, never parsed."""
    max_series: int = Field(50, ge=1, le=10_000)
    """The most series shown; the rest are counted and said."""
