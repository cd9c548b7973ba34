"""Where telemetry goes: `--otlp-endpoint`, else the standard `OTEL_EXPORTER_OTLP_*` variables.

    destination("http://collector:4318", content=False, env=os.environ)
    # -> Destination(traces="http://collector:4318/v1/traces",
    #                metrics="http://collector:4318/v1/metrics", content=False)

Standard library only, so a command can tell whether export is asked for without loading the
OpenTelemetry SDK. The exporter reads the other variables itself (headers, timeout,
compression, certificates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
SUPPORTED_PROTOCOL = "http/protobuf"
DISABLED = "OTEL_SDK_DISABLED"


class SettingsError(Exception):
    """The telemetry settings cannot work; the message says what to change."""


@dataclass(frozen=True)
class Destination:
    """The collector's signal URLs, and whether content (prompts, tool output) goes too."""

    traces: str
    metrics: str | None
    """None when only a traces endpoint is known: metrics then stay home."""
    content: bool = False


def destination(endpoint: str | None, content: bool, env: Mapping[str, str]) -> Destination | None:
    """Where to send, or None when export is not asked for. `endpoint` is the collector's base
    URL (like OTEL_EXPORTER_OTLP_ENDPOINT) or its traces URL; it wins over the variables.
    Raises SettingsError for a URL or protocol Sleuth cannot use."""
    if endpoint is None and env.get(DISABLED, "").strip().lower() == "true":
        return None
    for name in PROTOCOLS:
        protocol = env.get(name, SUPPORTED_PROTOCOL).strip() or SUPPORTED_PROTOCOL
        if protocol != SUPPORTED_PROTOCOL:
            raise SettingsError(
                f"{name}={protocol}: Sleuth exports OTLP over {SUPPORTED_PROTOCOL} (what the "
                f"OTLP spec recommends); set {name}={SUPPORTED_PROTOCOL} or unset it"
            )
    if endpoint is not None:
        base = _checked(endpoint, "--otlp-endpoint").removesuffix("/")
        base = base.removesuffix("/v1/traces")
        return Destination(f"{base}/v1/traces", f"{base}/v1/metrics", content)
    base = env.get(ENDPOINT, "").strip()
    traces = env.get(TRACES_ENDPOINT, "").strip() or (f"{_base(base)}/v1/traces" if base else "")
    if not traces:
        return None
    metrics = env.get(METRICS_ENDPOINT, "").strip() or (f"{_base(base)}/v1/metrics" if base else "")
    return Destination(
        _checked(traces, TRACES_ENDPOINT if env.get(TRACES_ENDPOINT) else ENDPOINT),
        _checked(metrics, METRICS_ENDPOINT if env.get(METRICS_ENDPOINT) else ENDPOINT)
        if metrics
        else None,
        content,
    )


def _base(url: str) -> str:
    return _checked(url, ENDPOINT).removesuffix("/")


def _checked(url: str, given_as: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"{given_as} {url!r} is not an http(s) URL; give the collector's OTLP/HTTP address, "
            "e.g. http://127.0.0.1:4318"
        )
    return url
