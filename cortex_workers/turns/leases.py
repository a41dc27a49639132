"""Leases of the steps this process runs, renewed together by one background thread, and the
cancel flags of their turns, watched together by another.

A step holds its lease for as long as it runs, however long the model waits before its first
token or a tool takes, and loses it within `lease_s` when its process dies. One UPDATE per
renewal covers every step the process holds, whatever their number. A step whose lease could
not be renewed (a newer attempt owns it, or its turn ended) is marked lost; its runner stops at
its next check, and its commit would be refused anyway (commits are fenced by attempt).

A streaming model step should stop soon after its turn is cancelled. Instead of each step
asking Redis between tokens, one thread reads the cancel flags of every watched turn with one
MGET every `CANCEL_CHECK_EVERY_S` and marks their leases cancelled: a thousand slow calls cost
four round trips a second, not thousands.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..runtime import Runtime
from ..store import steps as step_store
from ..store import workers as worker_store
from ..store.db import transaction
from ..streaming import cancel_key
from ..vocabulary import StepKind
from .steps import NextStep

log = logging.getLogger(__name__)

CANCEL_CHECK_EVERY_S = 0.25
"""How often the cancel flags of the watched turns are read (one Redis MGET for all)."""


class Lease:
    """One held step: `lost` turns true once its lease is known to be gone, `cancelled` once
    its turn's cancel flag is seen (only for steps held with `turn_id`)."""

    __slots__ = ("attempt", "cancelled", "lost", "step_id", "turn_id")

    def __init__(self, step_id: uuid.UUID, attempt: int, turn_id: uuid.UUID | None) -> None:
        self.step_id, self.attempt, self.turn_id = step_id, attempt, turn_id
        self.lost = self.cancelled = False


class LeaseKeeper:
    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._held: dict[tuple[uuid.UUID, int], Lease] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def every_s(self) -> float:
        return self._rt.settings.lease_s / 3

    @contextmanager
    def hold(
        self, step_id: uuid.UUID, attempt: int, *, watch_turn: uuid.UUID | None = None
    ) -> Iterator[Lease]:
        """Keep the step's lease while the block runs; with `watch_turn`, also watch that
        turn's cancel flag."""
        lease = Lease(step_id, attempt, watch_turn)
        with self._lock:
            self._held[(step_id, attempt)] = lease
            if not self._threads:
                self._threads = [
                    self._start("cortex-leases", self.renew_now, lambda: self.every_s),
                    self._start("cortex-cancels", self.check_cancels, lambda: CANCEL_CHECK_EVERY_S),
                ]
        try:
            yield lease
        finally:
            with self._lock:
                self._held.pop((step_id, attempt), None)

    def _held_now(self) -> list[Lease]:
        with self._lock:
            return list(self._held.values())

    def renew_now(self) -> None:
        """Renew every held lease once (a thread does this every `lease_s / 3`)."""
        held = self._held_now()
        if not held:
            return
        with transaction(self._rt.db) as db:
            kept = step_store.renew_leases(
                db, [(h.step_id, h.attempt) for h in held], lease_s=self._rt.settings.lease_s
            )
        for h in held:
            if (h.step_id, h.attempt) not in kept:
                h.lost = True

    def held_count(self) -> int:
        """How many steps this process holds now."""
        with self._lock:
            return len(self._held)

    def hand_back(self) -> list[NextStep]:
        """Give back every held lease (a draining worker): the steps are pending again, due
        now, and each runner stops at its next check; returns the steps to publish at once."""
        held = self._held_now()
        if not held:
            return []
        with transaction(self._rt.db) as db:
            back = worker_store.hand_back(db, [(h.step_id, h.attempt) for h in held])
        for h in held:
            h.lost = True
        return [
            NextStep(step_id, StepKind(kind), turn_id=turn_id) for step_id, turn_id, kind in back
        ]

    def check_cancels(self) -> None:
        """Read the cancel flags of every watched turn once (a thread does this every
        `CANCEL_CHECK_EVERY_S`)."""
        watched = [h for h in self._held_now() if h.turn_id is not None and not h.cancelled]
        if not watched:
            return
        flags = self._rt.redis.mget([cancel_key(h.turn_id) for h in watched if h.turn_id])
        for h, flag in zip(watched, flags, strict=True):
            if flag is not None:
                h.cancelled = True

    @staticmethod
    def _start(name: str, work: Callable[[], None], every: Callable[[], float]) -> threading.Thread:
        def run() -> None:
            while True:
                time.sleep(every())
                try:
                    work()
                except Exception:  # Postgres or Redis is down: keep trying
                    log.warning("%s: a round failed; retrying", name, exc_info=True)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread


_keepers: dict[int, LeaseKeeper] = {}
_keepers_lock = threading.Lock()


def keeper(rt: Runtime) -> LeaseKeeper:
    """This process's keeper (a forked child gets its own threads)."""
    pid = os.getpid()
    with _keepers_lock:
        k = _keepers.get(pid)
        if k is None or k._rt is not rt:
            k = _keepers[pid] = LeaseKeeper(rt)
        return k
