"""Queue `maintenance`: the reconciler, run by beat."""

from __future__ import annotations

from celery import shared_task

from ..dispatch import publish
from ..turns.reconcile import reconcile as sweep


@shared_task(name="cortex.maintenance.reconcile", ignore_result=True)
def reconcile() -> None:
    publish(sweep().publish)
