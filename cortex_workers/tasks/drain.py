"""Graceful drain of a worker process on SIGTERM (Celery's warm shutdown).

Celery stops taking tasks and waits for the running ones. This thread gives the steps they
hold `CORTEX_DRAIN_S` to finish; then it hands back the leases still held (the steps are
pending again and re-published at once, so another worker resumes them with `step_restart`),
forgets this process's heartbeat, and, if a runner is still stuck (say, waiting for a first
token) two seconds later, ends the process with status 0: its leases are already elsewhere and
any late write of it is fenced by attempt. See docs/operations.md (stopping workers).

Threads and gevent pools only: there the leases are in the main process. A prefork child holds
its own; they fall back to the heartbeat (the child dies with the pool) or the lease.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..dispatch import publish
from ..runtime import get_runtime
from ..turns.leases import keeper
from ..turns.liveness import liveness

log = logging.getLogger(__name__)

STUCK_GRACE_S = 2.0
"""After the hand-back, runners get this long to notice before the process exits anyway."""

_started = threading.Event()


def start_drain() -> None:
    """On the shutdown signal, in the worker's main process: drain in the background (once)."""
    if _started.is_set():
        return
    _started.set()
    threading.Thread(target=drain, name="cortex-drain", daemon=True).start()


def _wait_while_held(seconds: float) -> int:
    held = keeper(get_runtime())
    deadline = time.monotonic() + seconds
    while held.held_count() and time.monotonic() < deadline:
        time.sleep(0.1)
    return held.held_count()


def drain() -> None:
    rt = get_runtime()
    drain_s = rt.settings.drain_s
    still = _wait_while_held(drain_s)
    log.info("drain: %d steps still running after %.0fs", still, drain_s)
    if still:
        back = keeper(rt).hand_back()
        sent = publish(back)
        log.info("drain: handed back %d steps (%d published)", len(back), sent)
    liveness(rt).stop()
    if still and _wait_while_held(STUCK_GRACE_S):
        log.warning("drain: runners still stuck; exiting now (their steps are handed back)")
        logging.shutdown()
        os._exit(0)
