"""One process of a multiprocess stack: counts `N` finished turns and exits with an SSE
connection still open (as a killed pool child would); prints its pid."""

from __future__ import annotations

import os
import sys

from cortex_workers.observability import metrics

for _ in range(int(sys.argv[1])):
    metrics.observe_turn_finished("done", 1.5)
    metrics.count_step("model", "done")
with metrics.sse_connection("turn"):
    print(os.getpid(), flush=True)
    os._exit(0)
