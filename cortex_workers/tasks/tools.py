"""Queue `tools`: one task per tool call, and the looks at the tasks of parked calls."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..queues import EXECUTE_PROPOSAL, POLL_TOOL_TASK, RUN_TOOL_STEP
from ..turns.parked.poll import poll_parked
from ..turns.proposals import execute
from ..turns.tool_step import run_tool_step as run
from ..vocabulary import StepKind
from .drain import passed_on


@shared_task(name=RUN_TOOL_STEP, ignore_result=True)
def run_tool_step(step_id: str) -> None:
    if not passed_on(step_id, StepKind.TOOL):
        publish(run(uuid.UUID(step_id)))


@shared_task(name=EXECUTE_PROPOSAL, ignore_result=True)
def execute_proposal(proposal_id: str) -> None:
    execute(uuid.UUID(proposal_id))


@shared_task(name=POLL_TOOL_TASK, ignore_result=True)
def poll_tool_task(parked_id: str) -> None:
    publish(poll_parked(uuid.UUID(parked_id)))
