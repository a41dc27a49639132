"""Metrics, traces and the log format: what every process reports about the work it does.

At the bottom of the layers, next to `settings`: imported by everything, importing nothing of the
domain, so every helper takes plain strings (a `StrEnum` member is one). Nothing here does work
at import time; see docs/operations.md for the metric families, the trace shape and the
variables that switch them on.

- `metrics`: the Prometheus families, the scrape registry (multiprocess-aware), the worker's
  metrics server and typed helpers for the call sites.
- `tracing`: OpenTelemetry tracing, off unless the standard `OTEL_*` variables ask for it; spans
  for steps (children of the turn's stored `traceparent`), provider calls and tool runs.
- `logs`: text or JSON log lines carrying the turn, step, session and trace ids in force.
"""
