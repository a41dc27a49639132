"""Queue `tools`: one task per tool call."""

from __future__ import annotations

import uuid

from celery import shared_task

from ..dispatch import publish
from ..queues import EXECUTE_PROPOSAL, RUN_TOOL_STEP
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
