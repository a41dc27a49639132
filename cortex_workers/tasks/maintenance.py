"""Queue `maintenance`: the reconciler and the firing of scheduled turns, run by beat."""

from __future__ import annotations

from celery import shared_task

from ..dispatch import publish, publish_execution
from ..queues import FIRE_SCHEDULES, RECONCILE
from ..runtime import get_runtime
from ..turns.reconcile import reconcile as sweep
from ..turns.schedules import fire_due


@shared_task(name=RECONCILE, ignore_result=True)
def reconcile() -> None:
    done = sweep()
    publish(done.publish)
    for proposal_id in done.executions:
        publish_execution(proposal_id)


@shared_task(name=FIRE_SCHEDULES, ignore_result=True)
def fire_schedules() -> None:
    publish(fire_due(get_runtime()))
