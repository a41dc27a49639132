"""RedBeat, made to survive Redis trouble instead of dying or going quiet.

Stock RedBeat installs its static schedule only at startup and fails when its lock vanishes, so
a Redis restarted without its data leaves a beat that schedules nothing (no reconciler) or
exits. This one re-installs the schedule when it is missing, takes the lock back when it was
lost (unless another beat holds it now), and treats a Redis error in a tick as a pause.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from redbeat.schedulers import get_redis
from redis.exceptions import LockError, RedisError

if TYPE_CHECKING:
    from celery import Celery
    from redis.lock import Lock

    class RedBeatScheduler:
        """What this module uses of redbeat's scheduler (redbeat ships no type information)."""

        app: Celery
        lock: Lock | None
        lock_key: str | None
        max_interval: float

        def setup_schedule(self) -> None: ...

        def tick(self, min: Any = min, **kwargs: Any) -> float: ...

else:
    from redbeat import RedBeatScheduler

log = logging.getLogger(__name__)
RETRY_S = 1.0


class ResilientRedBeatScheduler(RedBeatScheduler):
    def tick(self, min: Any = min, **kwargs: Any) -> float:
        try:
            if not self._hold_lock():
                return float(self.max_interval)
            client = get_redis(self.app)
            if not client.exists(self.app.redbeat_conf.schedule_key):
                log.warning(
                    "beat: the schedule is missing from Redis (restarted without its "
                    "data?); installing it again"
                )
                self.setup_schedule()
            return float(super().tick(min=min, **kwargs))
        except (RedisError, LockError) as exc:
            log.warning("beat: Redis unavailable (%s); retrying in %.0fs", exc, RETRY_S)
            return RETRY_S

    def _hold_lock(self) -> bool:
        """True while this beat may schedule: it owns the lock, or got it back."""
        if not self.lock_key or self.lock is None:
            return True
        if self.lock.owned():
            return True
        if self.lock.acquire(blocking=False):
            log.warning("beat: the lock was lost (Redis restarted?); took it back")
            return True
        return False  # another beat holds it now: stand by
