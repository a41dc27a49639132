"""What runs when. Task and queue names come from `cortex_workers.queues`; no task code is
imported here."""

from __future__ import annotations

from typing import Any

from cortex_workers.queues import APPLY_RETENTION, RECONCILE, TAKE_OVER, Queue
from cortex_workers.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    every = settings.reconcile_every_s
    schedule = {
        "reconcile": {
            "task": RECONCILE,
            "schedule": every,
            # A sweep that waited longer than its interval is stale: the next one will come.
            "options": {"queue": Queue.MAINTENANCE.value, "expires": max(every * 2, 2.0)},
        },
        "take_over": {
            "task": TAKE_OVER,
            "schedule": settings.takeover_every_s,
            "options": {
                "queue": Queue.MAINTENANCE.value,
                "expires": max(settings.takeover_every_s * 2, 2.0),
            },
        },
    }
    if settings.retention_days is not None or settings.retention_tenants:
        schedule["retention"] = {
            "task": APPLY_RETENTION,
            "schedule": settings.retention_every_s,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": settings.retention_every_s},
        }
    return schedule
