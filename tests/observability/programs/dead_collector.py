"""Tracing towards a collector that never answers: `shutdown_tracing` still returns within its
bound, and says that the spans it held were dropped. argv[1]: the bound in seconds."""

from __future__ import annotations

import json
import logging
import sys

from cortex_workers.observability import tracing

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
configured = tracing.configure_tracing("cortex-dead-collector-test")
with tracing.span("never exported"):
    pass
tracing.shutdown_tracing(timeout_s=float(sys.argv[1]))
print(json.dumps({"configured": configured, "enabled": tracing.tracing_enabled()}))
