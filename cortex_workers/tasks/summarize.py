"""Queue `summarize`: rolling summaries."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..turns.summarize import run_summarize_step as run


@shared_task(name="cortex.summarize.run_summarize_step", ignore_result=True)
def run_summarize_step(step_id: str) -> None:
    publish(run(uuid.UUID(step_id)))
