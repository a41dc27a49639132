"""What runs when. Task and queue names come from `cortex_workers.queues`; no task code is
imported here."""

from __future__ import annotations

from typing import Any

from cortex_workers.queues import DISPATCH_WEBHOOKS, FIRE_SCHEDULES, RECONCILE, SWEEP_JOBS, Queue
from cortex_workers.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    every = settings.reconcile_every_s
    webhooks_every = settings.webhook_dispatch_every_s
    return {
        "reconcile": {
            "task": RECONCILE,
            "schedule": every,
            # A sweep that waited longer than its interval is stale: the next one will come.
            "options": {"queue": Queue.MAINTENANCE.value, "expires": max(every * 2, 2.0)},
        },
        "sweep-jobs": {
            "task": SWEEP_JOBS,
            "schedule": every,
            "options": {"queue": Queue.MAINTENANCE.value, "expires": max(every * 2, 2.0)},
        },
        "dispatch-webhooks": {
            "task": DISPATCH_WEBHOOKS,
            "schedule": webhooks_every,
            "options": {
                "queue": Queue.MAINTENANCE.value,
                "expires": max(webhooks_every * 2, 2.0),
            },
        },
        "fire_schedules": {
            "task": FIRE_SCHEDULES,
            "schedule": settings.schedules_every_s,
            # Firing is idempotent per schedule and fire time: a late sweep only repeats work.
            "options": {
                "queue": Queue.MAINTENANCE.value,
                "expires": max(settings.schedules_every_s * 2, 2.0),
            },
        },
    }
