"""Queue `agents`: python agent handlers and A2A calls, one task per agent task."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..queues import RUN_AGENT_TASK
from ..turns.agents.runner import run_agent_task as run


@shared_task(name=RUN_AGENT_TASK, ignore_result=True)
def run_agent_task(task_id: str) -> None:
    publish(run(uuid.UUID(task_id)))
