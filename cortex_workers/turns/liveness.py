"""This worker process's liveness: a heartbeat row in Postgres, refreshed every
`liveness_s / 4` by a thread of its own on a connection of its own, and the holder id its
claims write on the steps they lease (host, pid and a boot nonce, so a restarted process with a
recycled pid is someone else).

The heartbeat runs on an OS thread even under gevent (where `threading.Thread` is a greenlet
that any step computing without yielding would starve), with the psycopg connection waiting on
that thread's own gevent hub.

A leased step whose holder has not beaten for `liveness_s` (and whose lease was not renewed
within it either) may be claimed again at once, and
the reconciler's takeover pass re-publishes it every `takeover_every_s`: a SIGKILLed worker's
steps resume within seconds instead of waiting out their lease. Why the heartbeat is in Postgres
rather than Redis: the claim that takes a step is decided in Postgres, on Postgres's clock, so
liveness and takeover can never disagree, and a Redis blip cannot take a step from a live
worker. See docs/reliability.md.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from ..runtime import Runtime
from ..store.claims import Holder
from ..store.db import normalize_url
from ..store.workers import BEAT_SESSION, FORGET_SQL, HEARTBEAT_SQL

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2
"""The heartbeat's connection gives up this soon, and each beat's statement too: a beat that
cannot land in time is a missed beat, and the next one tries again."""


def new_holder_id() -> str:
    """`host:pid:nonce`, unique per process start."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{secrets.token_hex(4)}"


class Liveness:
    """The heartbeat of one process."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.holder_id = new_holder_id()
        self._url = (
            make_url(normalize_url(rt.settings.database_url))
            .set(drivername="postgresql")
            .render_as_string(hide_password=False)
        )
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    @property
    def every_s(self) -> float:
        return self._rt.settings.liveness_s / 4

    def holder(self) -> Holder:
        """This process as a claim names it; the first call beats once before returning (a
        step is never claimed by a holder the database does not know alive), then starts the
        heartbeat thread."""
        with self._lock:
            if not self._started:
                self.beat()
                _native_start(self._run)
                self._started = True
        return Holder(worker=self.holder_id, liveness_s=self._rt.settings.liveness_s)

    def beat(self) -> None:
        """Refresh this process's row (raises when Postgres cannot be reached)."""
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                options=f"-c statement_timeout={CONNECT_TIMEOUT_S * 1000} {BEAT_SESSION}",
                application_name="cortex-liveness",
            )
        try:
            conn.execute(
                HEARTBEAT_SQL,
                {"holder": self.holder_id, "hostname": socket.gethostname(), "pid": os.getpid()},
            )
        except psycopg.Error:
            conn.close()
            raise

    def _run(self) -> None:
        sleep = _native_sleep()
        while not self._stopped:
            sleep(self.every_s)
            if self._stopped:
                break
            try:
                self.beat()
            except Exception:  # Postgres unreachable: the next beat tries again
                log.warning("liveness: a heartbeat failed; retrying", exc_info=True)

    def stop(self) -> None:
        """Stop beating and forget this process: the steps it still holds are free at once."""
        self._stopped = True
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=2) as conn:
                conn.execute(FORGET_SQL, {"holder": self.holder_id})
        except psycopg.Error:
            log.warning("liveness: could not forget this worker", exc_info=True)


def _gevent_monkey() -> Any:
    """gevent's `monkey` module when this process is monkey-patched, else None."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey if monkey is not None and monkey.is_module_patched("threading") else None


def _native_start(run: Callable[[], None]) -> None:
    """Run `run` on an OS thread. Under gevent a `threading.Thread` is a greenlet, which a
    step that computes without yielding (a big import, a long JSON parse) would starve; an OS
    thread keeps beating through that, as it does through a task thread's work elsewhere."""
    monkey = _gevent_monkey()
    if monkey is None:
        threading.Thread(target=run, name="cortex-liveness", daemon=True).start()
    else:
        monkey.get_original("_thread", "start_new_thread")(run, ())


def _native_sleep() -> Callable[[float], None]:
    monkey = _gevent_monkey()
    sleep: Callable[[float], None] = (
        time.sleep if monkey is None else monkey.get_original("time", "sleep")
    )
    return sleep


_by_pid: dict[int, Liveness] = {}
_by_pid_lock = threading.Lock()


def liveness(rt: Runtime) -> Liveness:
    """This process's heartbeat (a forked child gets its own)."""
    pid = os.getpid()
    with _by_pid_lock:
        live = _by_pid.get(pid)
        if live is None or live._rt is not rt:
            live = _by_pid[pid] = Liveness(rt)
        return live


def holder(rt: Runtime) -> Holder:
    """What this process's claims write as the holder of the steps they lease."""
    return liveness(rt).holder()
