"""Queue `summarize`: rolling summaries."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..queues import RUN_SUMMARIZE_STEP
from ..turns.summarize import run_summarize_step as run
from ..vocabulary import StepKind
from .drain import passed_on


@shared_task(name=RUN_SUMMARIZE_STEP, ignore_result=True)
def run_summarize_step(step_id: str) -> None:
    if not passed_on(step_id, StepKind.SUMMARIZE):
        publish(run(uuid.UUID(step_id)))
