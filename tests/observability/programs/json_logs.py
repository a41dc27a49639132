"""Logs one line outside and one inside a log context and a span; prints the span's trace id."""

from __future__ import annotations

import json
import logging

from cortex_workers.observability import logs, tracing

logs.configure_logging("info")
logs.configure_logging("info")  # a second call replaces the first handler
tracing.configure_tracing("cortex-logs-test")
log = logging.getLogger("cortex_workers.example")
log.info("outside")
trace_id = None
with tracing.span("work"), logs.log_context(turn_id="turn-1", step_id=7, session_id="sess-1"):
    trace_id = tracing.current_trace_id()
    log.warning("inside %s", "the turn")
tracing.shutdown_tracing()
print(json.dumps({"trace_id": trace_id}))
