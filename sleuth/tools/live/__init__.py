"""Live engines, however they were started: their state and windowed rates (engine_status),
their periodic log lines as a time series (engine_log_series) and their Prometheus history
(query_metrics)."""
