"""What runs when. Task and queue names come from `cortex_workers.queues`; no task code is
imported here."""

from __future__ import annotations

from typing import Any

from cortex_workers.queues import (
    APPLY_RETENTION,
    DISPATCH_WEBHOOKS,
    FIRE_SCHEDULES,
    RECONCILE,
    SWEEP_JOBS,
    TAKE_OVER,
    Queue,
)
from cortex_workers.settings import Settings


def _every(task: str, seconds: float) -> dict[str, Any]:
    """A maintenance task every `seconds`; a run that waited longer than twice its interval is
    stale (the next one will come) and is dropped."""
    return {
        "task": task,
        "schedule": seconds,
        "options": {"queue": Queue.MAINTENANCE.value, "expires": max(seconds * 2, 2.0)},
    }


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    every = settings.reconcile_every_s
    schedule = {
        "reconcile": _every(RECONCILE, every),
        "take_over": _every(TAKE_OVER, settings.takeover_every_s),
        "sweep-jobs": _every(SWEEP_JOBS, every),
        "dispatch-webhooks": _every(DISPATCH_WEBHOOKS, settings.webhook_dispatch_every_s),
        # Firing is idempotent per schedule and fire time: a late sweep only repeats work.
        "fire_schedules": _every(FIRE_SCHEDULES, settings.schedules_every_s),
    }
    if settings.retention_days is not None or settings.retention_tenants:
        schedule["retention"] = {
            "task": APPLY_RETENTION,
            "schedule": settings.retention_every_s,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": settings.retention_every_s},
        }
    return schedule
