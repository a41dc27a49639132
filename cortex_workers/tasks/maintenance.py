"""Queue `maintenance`: the reconciler, run by beat."""

from __future__ import annotations

from celery import shared_task

from ..dispatch import publish, publish_execution
from ..queues import RECONCILE
from ..turns.reconcile import reconcile as sweep


@shared_task(name=RECONCILE, ignore_result=True)
def reconcile() -> None:
    done = sweep()
    publish(done.publish)
    for proposal_id in done.executions:
        publish_execution(proposal_id)
