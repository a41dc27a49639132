"""Queue `llm`: model steps."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..queues import RUN_MODEL_STEP
from ..turns.model_step import run_model_step as run
from ..vocabulary import StepKind
from .drain import passed_on


@shared_task(name=RUN_MODEL_STEP, ignore_result=True)
def run_model_step(step_id: str) -> None:
    if not passed_on(step_id, StepKind.MODEL):
        publish(run(uuid.UUID(step_id)))
