"""Leases of the steps this process runs, renewed together by one background thread.

A step holds its lease for as long as it runs, however long the model waits before its first
token or a tool takes, and loses it within `lease_s` when its process dies. One UPDATE per
renewal covers every step the process holds, whatever their number. A step whose lease could
not be renewed (a newer attempt owns it, or its turn ended) is marked lost; its runner stops at
its next check, and its commit would be refused anyway (commits are fenced by attempt).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ..runtime import Runtime
from ..store import steps as step_store
from ..store.db import transaction

log = logging.getLogger(__name__)


class Lease:
    """One held step: `lost` turns true once its lease is known to be gone."""

    __slots__ = ("attempt", "lost", "step_id")

    def __init__(self, step_id: uuid.UUID, attempt: int) -> None:
        self.step_id, self.attempt, self.lost = step_id, attempt, False


class LeaseKeeper:
    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._held: dict[tuple[uuid.UUID, int], Lease] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def every_s(self) -> float:
        return self._rt.settings.lease_s / 3

    @contextmanager
    def hold(self, step_id: uuid.UUID, attempt: int) -> Iterator[Lease]:
        lease = Lease(step_id, attempt)
        with self._lock:
            self._held[(step_id, attempt)] = lease
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="cortex-leases", daemon=True)
                self._thread.start()
        try:
            yield lease
        finally:
            with self._lock:
                self._held.pop((step_id, attempt), None)

    def renew_now(self) -> None:
        """Renew every held lease once (the thread does this every `lease_s / 3`)."""
        with self._lock:
            held = list(self._held.values())
        if not held:
            return
        with transaction(self._rt.db) as db:
            kept = step_store.renew_leases(
                db, [(h.step_id, h.attempt) for h in held], lease_s=self._rt.settings.lease_s
            )
        for h in held:
            if (h.step_id, h.attempt) not in kept:
                h.lost = True

    def _run(self) -> None:
        while not self._wake.wait(self.every_s):
            try:
                self.renew_now()
            except Exception:  # the database is down: keep trying, leases may lapse meanwhile
                log.warning("renewing step leases failed; retrying", exc_info=True)


_keepers: dict[int, LeaseKeeper] = {}
_keepers_lock = threading.Lock()


def keeper(rt: Runtime) -> LeaseKeeper:
    """This process's keeper (a forked child gets its own thread)."""
    pid = os.getpid()
    with _keepers_lock:
        k = _keepers.get(pid)
        if k is None or k._rt is not rt:
            k = _keepers[pid] = LeaseKeeper(rt)
        return k
