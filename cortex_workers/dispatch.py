"""The only code that publishes steps: by task name, to the step kind's queue.

Called after the transaction that created the steps has committed (commit, then publish). A
publish that fails is not an error for the caller: the step is in Postgres and the reconciler
re-publishes it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from celery import current_app

from .queues import (
    DELIVER_WEBHOOK,
    EXECUTE_PROPOSAL,
    POLL_TOOL_TASK,
    RUN_AGENT_TASK,
    RUN_BATCH_JOB,
    RUN_JOB,
    Queue,
    step_route,
)
from .turns.steps import AgentTaskRef, NextStep, Publish, TaskPollRef

log = logging.getLogger(__name__)


def argsrepr(step: NextStep) -> str:
    """How a step's task shows in Flower and in task events: its ids and kind, searchable by
    any of them. The task's argument is the step id only; nothing of the conversation."""
    parts = [f"step={step.id}"]
    if step.turn_id is not None:
        parts.append(f"turn={step.turn_id}")
    if step.session_id is not None:
        parts.append(f"session={step.session_id}")
    parts.append(f"kind={step.kind.value}")
    return " ".join(parts)


def publish(steps: Iterable[Publish]) -> int:
    """Send each step's task (task id = step id), each agent task's run and each poll of a
    parked call; returns how many were sent."""
    sent = 0
    for step in steps:
        if isinstance(step, AgentTaskRef):
            sent += publish_agent_task(step)
            continue
        if isinstance(step, TaskPollRef):
            sent += publish_task_poll(step)
            continue
        route = step_route(step.kind)
        try:
            current_app.send_task(
                route.task,
                args=[str(step.id)],
                task_id=str(step.id),
                queue=route.queue.value,
                countdown=step.countdown or None,
                argsrepr=argsrepr(step),
                kwargsrepr="",
            )
            sent += 1
        except Exception:  # broker down: the reconciler will re-publish from Postgres
            log.warning(
                "could not publish %s step %s; the reconciler will",
                step.kind,
                step.id,
                exc_info=True,
            )
    return sent


def publish_execution(proposal_id: uuid.UUID) -> None:
    """Hand a confirmed proposal to a `tools` worker (re-sent by the reconciler if lost)."""
    try:
        current_app.send_task(
            EXECUTE_PROPOSAL,
            args=[str(proposal_id)],
            task_id=f"execute-{proposal_id}",
            queue=Queue.TOOLS.value,
            argsrepr=f"proposal={proposal_id}",
            kwargsrepr="",
        )
    except Exception:
        log.warning(
            "could not publish execution of proposal %s; the reconciler will",
            proposal_id,
            exc_info=True,
        )


def publish_deliveries(due: Iterable[tuple[uuid.UUID, int]]) -> None:
    """Hand due webhook deliveries to the `webhooks` workers; `(id, attempts so far)` each
    (a lost one is published again by the next sweep once its hold runs out)."""
    for delivery_id, attempts in due:
        try:
            current_app.send_task(
                DELIVER_WEBHOOK,
                args=[str(delivery_id), attempts],
                task_id=f"delivery-{delivery_id}-{attempts}",
                queue=Queue.WEBHOOKS.value,
                argsrepr=f"delivery={delivery_id} attempt={attempts + 1}",
                kwargsrepr="",
            )
        except Exception:
            log.warning("could not publish delivery %s; the sweep will", delivery_id, exc_info=True)


def publish_jobs(job_ids: Iterable[uuid.UUID], *, batch: bool) -> None:
    """Hand jobs to workers: a single job to the `llm` queue, a batch's jobs to the `batch`
    queue (its own workers, so a batch never delays interactive turns). A lost publish is
    re-published by the job sweep."""
    task, queue = (RUN_BATCH_JOB, Queue.BATCH) if batch else (RUN_JOB, Queue.LLM)
    for job_id in job_ids:
        try:
            current_app.send_task(
                task,
                args=[str(job_id)],
                task_id=f"job-{job_id}",
                queue=queue.value,
                argsrepr=f"job={job_id}",
                kwargsrepr="",
            )
        except Exception:
            log.warning("could not publish job %s; the sweep will", job_id, exc_info=True)


def publish_agent_task(task: AgentTaskRef) -> int:
    """Hand an agent task to an `agents` worker (re-sent by the reconciler if lost)."""
    try:
        current_app.send_task(
            RUN_AGENT_TASK,
            args=[str(task.id)],
            queue=Queue.AGENTS.value,
            argsrepr=f"task={task.id} session={task.session_id}",
            kwargsrepr="",
        )
    except Exception:
        log.warning("could not publish agent task %s; the reconciler will", task.id, exc_info=True)
        return 0
    return 1


def publish_task_poll(poll: TaskPollRef) -> int:
    """Hand a look at a parked call's MCP task to a `tools` worker, after its countdown (a
    lost one is sent again by the reconciler)."""
    try:
        current_app.send_task(
            POLL_TOOL_TASK,
            args=[str(poll.id)],
            queue=Queue.TOOLS.value,
            countdown=poll.countdown or None,
            argsrepr=f"parked={poll.id}",
            kwargsrepr="",
        )
    except Exception:
        log.warning("could not publish the poll of %s; the reconciler will", poll.id, exc_info=True)
        return 0
    return 1
