"""Queue `maintenance`: the reconciler, its takeover pass, retention and the firing of scheduled
turns, run by beat."""

from __future__ import annotations

import logging

from celery import shared_task

from ..dispatch import publish, publish_execution
from ..queues import APPLY_RETENTION, FIRE_SCHEDULES, RECONCILE, TAKE_OVER
from ..runtime import get_runtime
from ..turns.reconcile import reconcile as sweep
from ..turns.reconcile import take_over as sweep_dead_workers
from ..turns.retention import apply_retention as delete_due
from ..turns.schedules import fire_due

log = logging.getLogger(__name__)


@shared_task(name=RECONCILE, ignore_result=True, send_events=False)
def reconcile() -> None:
    done = sweep()
    publish(done.publish)
    for proposal_id in done.executions:
        publish_execution(proposal_id)


@shared_task(name=FIRE_SCHEDULES, ignore_result=True, send_events=False)
def fire_schedules() -> None:
    fired = fire_due(get_runtime())
    if fired:
        log.info("schedules fired %d turns", len(fired))
    publish(fired)


@shared_task(name=TAKE_OVER, ignore_result=True, send_events=False)
def take_over() -> None:
    publish(sweep_dead_workers().publish)


@shared_task(name=APPLY_RETENTION, ignore_result=True)
def apply_retention() -> None:
    delete_due()
