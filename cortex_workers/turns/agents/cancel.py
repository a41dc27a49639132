"""Stopping agent tasks: cancelled over the API, or orphaned (a foreground call whose calling
turn ended first). The task ends like any other (`results.complete`), and a sub-agent's
child turn is cancelled with it."""

from __future__ import annotations

import uuid

from ...errors import ConflictError, NotFound
from ...messages import ErrorDoc
from ...runtime import Runtime
from ...store import agent_tasks, repo
from ...store.db import transaction
from ...vocabulary import TaskStatus, TurnStatus
from ..lifecycle import announce, end_turn
from ..steps import NextStep
from .results import complete

CANCELLED: ErrorDoc = {"code": "canceled", "message": "the task was cancelled"}
ORPHANED: ErrorDoc = {
    "code": "canceled",
    "message": "the calling turn ended before the agent answered",
}


def cancel_task(rt: Runtime, *, tenant_id: uuid.UUID, task_id: uuid.UUID) -> list[NextStep]:
    """Cancel an open task of the tenant (see the module's doc). `NotFound`, or
    `ConflictError` when it had already completed or failed."""
    with transaction(rt.db) as db:
        if agent_tasks.get(db, task_id, tenant_id=tenant_id) is None:
            raise NotFound(f"task {task_id} not found")
    publish = stop_task(rt, task_id, error=CANCELLED)
    with transaction(rt.db) as db:
        task = agent_tasks.get(db, task_id)
    if task is not None and TaskStatus(task.status) != TaskStatus.CANCELED:
        raise ConflictError(
            f"task {task_id} has already ended ({task.status}); nothing to cancel",
            code="task_finished",
            details={"status": task.status},
        )
    return publish


def stop_task(rt: Runtime, task_id: uuid.UUID, *, error: ErrorDoc) -> list[NextStep]:
    """End an open task as cancelled, and its sub-agent's turn with it (idempotent)."""
    publish = complete(rt, task_id, status=TaskStatus.CANCELED, error=error)
    with transaction(rt.db) as db:
        task = agent_tasks.get(db, task_id)
        turn = repo.get_turn(db, task.child_turn_id) if task and task.child_turn_id else None
        ended = None
        if turn is not None and not turn.status.is_terminal:
            repo.get_session(db, turn.session_id, lock=True)
            ended, more = end_turn(
                rt, db, session_id=turn.session_id, turn_id=turn.id, status=TurnStatus.CANCELLED
            )
            publish += more
    announce(rt, ended)
    return publish
