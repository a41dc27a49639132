"""A worker's metrics server on the port in argv[1] (0: none); prints whether it started."""

from __future__ import annotations

import sys
import time

from cortex_workers.observability import metrics

started = metrics.start_worker_metrics_server(int(sys.argv[1]), addr="127.0.0.1")
metrics.count_step("tool", "retried")
print("started" if started else "off", flush=True)
if started:
    time.sleep(60)
