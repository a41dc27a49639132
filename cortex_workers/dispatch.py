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

from .queues import EXECUTE_PROPOSAL, RUN_AGENT_TASK, Queue, step_route
from .turns.steps import AgentTaskRef, NextStep, Publish

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
    """Send each step's task (task id = step id), and each agent task's run; returns how many
    were sent."""
    sent = 0
    for step in steps:
        if isinstance(step, AgentTaskRef):
            sent += publish_agent_task(step)
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
