"""What runs when. Task names are strings: this module imports no task code."""

from __future__ import annotations

from typing import Any

from cortex_workers.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    every = settings.reconcile_every_s
    return {
        "reconcile": {
            "task": "cortex.maintenance.reconcile",
            "schedule": every,
            # A sweep that waited longer than its interval is stale: the next one will come.
            "options": {"queue": "maintenance", "expires": max(every * 2, 2.0)},
        },
    }
