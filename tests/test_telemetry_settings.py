"""Where export goes, by the flag and the standard OTEL_EXPORTER_OTLP_* variables, and the
W3C traceparent Sleuth reads from a client and writes for an engine."""

from __future__ import annotations

import pytest

from sleuth.telemetry import ids
from sleuth.telemetry.settings import Destination, SettingsError, destination

BASE = "http://collector:4318"


@pytest.mark.parametrize(
    ("endpoint", "env", "expected"),
    [
        (None, {}, None),
        (BASE, {}, Destination(f"{BASE}/v1/traces", f"{BASE}/v1/metrics")),
        (f"{BASE}/v1/traces", {}, Destination(f"{BASE}/v1/traces", f"{BASE}/v1/metrics")),
        (
            None,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": BASE + "/"},
            Destination(f"{BASE}/v1/traces", f"{BASE}/v1/metrics"),
        ),
        (
            None,
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"},
            Destination("http://t:1/x", None),
        ),
        (
            None,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": BASE,
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:2/y",
            },
            Destination(f"{BASE}/v1/traces", "http://m:2/y"),
        ),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": BASE, "OTEL_SDK_DISABLED": "true"}, None),
        (
            "http://flag:1",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": BASE},
            Destination("http://flag:1/v1/traces", "http://flag:1/v1/metrics"),
        ),
    ],
)
def test_the_flag_wins_then_the_signal_variables_then_the_base(
    endpoint: str | None, env: dict[str, str], expected: Destination | None
) -> None:
    assert destination(endpoint, False, env) == expected


@pytest.mark.parametrize(
    ("endpoint", "env"),
    [
        ("collector:4318", {}),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x"}),
        (BASE, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}),
        (BASE, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}),
    ],
)
def test_what_cannot_work_is_refused_with_what_to_change(
    endpoint: str | None, env: dict[str, str]
) -> None:
    with pytest.raises(SettingsError):
        destination(endpoint, False, env)


def test_traceparent_round_trips_and_bad_ones_are_ignored() -> None:
    header = ids.traceparent(ids.trace_id("s1"), ids.span_id("s1", "call", "c1"))
    assert ids.parse_traceparent(header) == (ids.trace_id("s1"), ids.span_id("s1", "call", "c1"), 1)
    assert ids.parse_traceparent(header.upper()) is not None
    for bad in (
        "",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
    ):
        assert ids.parse_traceparent(bad) is None, bad
    future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more"
    assert ids.parse_traceparent(future) is not None


def test_ids_derive_from_the_session_and_differ_by_place() -> None:
    assert ids.trace_id("a") == ids.trace_id("a") != ids.trace_id("b")
    assert ids.span_id("a", "call", "x") != ids.span_id("a", "turn", 3)
    assert 0 < ids.span_id("a", "segment", 0) < 2**64 and 0 < ids.trace_id("a") < 2**128
