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
import uuid

from ..dispatch import publish
from ..runtime import get_runtime
from ..turns.leases import keeper
from ..turns.liveness import liveness
from ..turns.steps import NextStep
from ..vocabulary import StepKind

log = logging.getLogger(__name__)

STUCK_GRACE_S = 2.0
"""After the hand-back, runners get this long to notice before the process exits anyway."""

_requested = threading.Event()
_watching = threading.Event()


def watch_for_drain() -> None:
    """When the worker is ready, in its main process: a thread that waits for the drain (the
    signal handler only sets a flag: under gevent it may not start a thread)."""
    if _watching.is_set():
        return
    _watching.set()

    def wait_then_drain() -> None:
        _requested.wait()
        drain()

    threading.Thread(target=wait_then_drain, name="cortex-drain", daemon=True).start()


def start_drain() -> None:
    """On the shutdown signal, in the worker's main process."""
    _requested.set()


def passed_on(step_id: str, kind: StepKind) -> bool:
    """In a task, before its step is claimed: a draining worker takes no new step; it sends
    the delivery on (Celery may still deliver for a moment after the signal)."""
    if not _requested.is_set():
        return False
    # at once: a delayed (ETA) delivery that came back to this worker would be held in its
    # timer and lost with it, until the reconciler re-published the step
    publish([NextStep(uuid.UUID(step_id), kind)])
    return True


def _wait_while_held(seconds: float) -> int:
    held = keeper(get_runtime())
    deadline = time.monotonic() + seconds
    while held.held_count() and time.monotonic() < deadline:
        time.sleep(0.1)
    return held.held_count()


def drain() -> None:
    rt = get_runtime()
    drain_s = rt.settings.drain_s
    running = keeper(rt).held_count()
    if not running:
        log.info("drain: no step running; stopping now")
        still = 0
    else:
        log.info("drain: waiting up to %.0fs for %d running steps to finish", drain_s, running)
        started = time.monotonic()
        still = _wait_while_held(drain_s)
        if not still:
            took = time.monotonic() - started
            log.info("drain: the %d running steps finished in %.1fs; stopping", running, took)
    if still:
        log.info("drain: %d of %d steps still running after %.0fs", still, running, drain_s)
        back = keeper(rt).hand_back()
        sent = publish(back)
        log.info(
            "drain: handed back %d steps (%d published): another worker resumes them",
            len(back),
            sent,
        )
    liveness(rt).stop()
    if still and _wait_while_held(STUCK_GRACE_S):
        log.warning("drain: runners still stuck; exiting now (their steps are handed back)")
        logging.shutdown()
        os._exit(0)
