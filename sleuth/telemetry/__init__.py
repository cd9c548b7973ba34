"""OpenTelemetry export of investigations: GenAI spans and metrics, live and from transcripts.

Imported only when export is asked for (`--otlp-endpoint`, the `OTEL_EXPORTER_OTLP_*`
variables, `sleuth export otel`). Besides the standard library it knows only the transcripts:
what it exports is what the transcript recorded, already redacted.
"""

INSTALL_HINT = "pip install 'sleuth[otel]'"
"""How to get the OpenTelemetry SDK and OTLP exporter this package needs."""
