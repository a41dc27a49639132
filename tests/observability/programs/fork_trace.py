"""Tracing configured before a fork keeps exporting from the parent and the child."""

from __future__ import annotations

import os

from cortex_workers.observability import tracing

assert tracing.configure_tracing("cortex-fork-test")
with tracing.span("before fork"):
    pass
pid = os.fork()
if pid == 0:
    assert tracing.configure_tracing("cortex-fork-test")  # as worker_process_init does
    with tracing.span("in child"):
        pass
    tracing.shutdown_tracing()
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert status == 0, status
with tracing.span("in parent after fork"):
    pass
tracing.shutdown_tracing()
