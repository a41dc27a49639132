"""Agent tasks: one row per agent call, claimed with a lease and finished once (every write
is conditional, so a redelivered task or a duplicated push changes nothing)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from pydantic import JsonValue
from sqlalchemy import func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import ErrorDoc, JsonObject, TaskProgress
from ..vocabulary import (
    OPEN_TASK_STATUSES,
    TERMINAL_TURN_STATUSES,
    AgentKind,
    AgentMode,
    StepStatus,
    TaskStatus,
    WebhookEventType,
)
from .models import AgentTask, Step, Turn
from .repo import storable_json
from .webhooks import record_event

_OPEN = AgentTask.status.in_(OPEN_TASK_STATUSES)


@dataclass(frozen=True, slots=True)
class NewTask:
    """An agent call as the tool step that made it knows it."""

    tenant_id: uuid.UUID
    session_id: uuid.UUID
    turn_id: uuid.UUID
    tool_call_id: uuid.UUID
    call_id: str
    step_id: uuid.UUID
    step_attempt: int
    model_step_no: int
    agent: str
    kind: str
    mode: str
    input: JsonObject
    timeout_s: float


def create(db: Db, new: NewTask) -> tuple[AgentTask, bool]:
    """The call's task, stored once per tool call; True when this call stored it."""
    stored = db.execute(
        insert(AgentTask)
        .values(
            id=uuid.uuid4(),
            tenant_id=new.tenant_id,
            session_id=new.session_id,
            turn_id=new.turn_id,
            tool_call_id=new.tool_call_id,
            call_id=new.call_id,
            step_id=new.step_id,
            step_attempt=new.step_attempt,
            model_step_no=new.model_step_no,
            agent=new.agent,
            kind=new.kind,
            mode=new.mode,
            status=TaskStatus.SUBMITTED,
            input=storable_json(new.input),
            deadline=func.now() + timedelta(seconds=new.timeout_s),
        )
        .on_conflict_do_nothing(index_elements=["tool_call_id"])
        .returning(AgentTask.id)
    ).scalar_one_or_none()
    row = db.execute(
        select(AgentTask).where(AgentTask.tool_call_id == new.tool_call_id)
    ).scalar_one()
    return row, stored is not None


def get(db: Db, task_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None) -> AgentTask | None:
    query = select(AgentTask).where(AgentTask.id == task_id)
    if tenant_id is not None:
        query = query.where(AgentTask.tenant_id == tenant_id)
    return db.execute(query).scalar_one_or_none()


def of_session(db: Db, session_id: uuid.UUID) -> Sequence[AgentTask]:
    return (
        db.execute(
            select(AgentTask)
            .where(AgentTask.session_id == session_id)
            .order_by(AgentTask.created_at, AgentTask.id)
        )
        .scalars()
        .all()
    )


def of_child_turn(db: Db, turn_id: uuid.UUID) -> AgentTask | None:
    return db.execute(
        select(AgentTask).where(AgentTask.child_turn_id == turn_id, _OPEN)
    ).scalar_one_or_none()


def hold_step(db: Db, task: AgentTask, attempt: int, *, slack_s: float) -> None:
    """Keep the calling tool step leased (attempt `attempt`) until the task's deadline: the
    task, not a worker, now answers for it."""
    task.step_attempt = attempt
    db.execute(
        update(Step)
        .where(Step.id == task.step_id, Step.attempt == attempt, Step.status == StepStatus.LEASED)
        .values(lease_until=AgentTask.deadline + timedelta(seconds=slack_s))
        .where(AgentTask.id == task.id)
    )
    db.flush()


def link_child(db: Db, task: AgentTask, *, session_id: uuid.UUID, turn_id: uuid.UUID) -> None:
    task.child_session_id, task.child_turn_id = session_id, turn_id
    task.status = TaskStatus.WORKING
    db.flush()


def claim(db: Db, task_id: uuid.UUID, *, lease_s: float) -> tuple[AgentTask, int] | None:
    """Take the task for one run: it is submitted, or its last runner's lease ran out.
    None for a duplicate delivery (someone holds it) or an ended task."""
    attempt = db.execute(
        update(AgentTask)
        .where(
            AgentTask.id == task_id,
            _OPEN,
            or_(
                AgentTask.status == TaskStatus.SUBMITTED,
                AgentTask.lease_until.is_(None),
                AgentTask.lease_until < func.now(),
            ),
        )
        .values(
            status=TaskStatus.WORKING,
            attempt=AgentTask.attempt + 1,
            lease_until=func.now() + timedelta(seconds=lease_s),
        )
        .returning(AgentTask.attempt)
    ).scalar_one_or_none()
    if attempt is None:
        return None
    row = get(db, task_id)
    assert row is not None
    return row, attempt


def renew(db: Db, task_id: uuid.UUID, attempt: int, *, lease_s: float) -> bool:
    """Extend the runner's lease; False when the task ended or another attempt owns it."""
    return (
        db.execute(
            update(AgentTask)
            .where(AgentTask.id == task_id, AgentTask.attempt == attempt, _OPEN)
            .values(lease_until=func.now() + timedelta(seconds=lease_s))
            .returning(AgentTask.id)
        ).scalar_one_or_none()
        is not None
    )


def remember_remote(db: Db, task_id: uuid.UUID, attempt: int, remote_id: str) -> None:
    """The remote (A2A) task a run started: a later run polls it instead of sending again."""
    db.execute(
        update(AgentTask)
        .where(AgentTask.id == task_id, AgentTask.attempt == attempt, _OPEN)
        .values(remote_task_id=remote_id[:200])
    )


def report_progress(
    db: Db, task_id: uuid.UUID, attempt: int, progress: TaskProgress
) -> AgentTask | None:
    return db.execute(
        update(AgentTask)
        .where(AgentTask.id == task_id, AgentTask.attempt == attempt, _OPEN)
        .values(progress=storable_json(progress))
        .returning(AgentTask)
    ).scalar_one_or_none()


def finish(
    db: Db,
    task_id: uuid.UUID,
    *,
    status: TaskStatus,
    attempt: int | None = None,
    result: Any = None,
    error: ErrorDoc | None = None,
) -> AgentTask | None:
    """End an open task (fenced by the runner's `attempt` when given); None when it had ended
    or another attempt owns it. Caller holds the parent session's lock."""
    where = [AgentTask.id == task_id, _OPEN]
    if attempt is not None:
        where.append(AgentTask.attempt == attempt)
    values: dict[str, object] = {
        "status": status,
        "finished_at": func.now(),
        "lease_until": None,
        "result": storable_json(result) if result is not None else None,
        "error": error,
    }
    if status == TaskStatus.COMPLETED:
        values["progress"] = {"fraction": 1.0, "note": "done"}
    row = db.execute(
        update(AgentTask).where(*where).values(**values).returning(AgentTask.id)
    ).scalar_one_or_none()
    if row is None:
        return None
    task = get(db, task_id)
    if task is not None:
        db.refresh(task)
        if task.mode == AgentMode.BACKGROUND:  # in the same transaction (docs/webhooks.md)
            data = {
                "task_id": str(task.id),
                "session_id": str(task.session_id),
                "agent": task.agent,
                "status": task.status.value,
            }
            record_event(db, task.tenant_id, WebhookEventType.TASK_COMPLETED, data)
    return task


def set_follow_up(db: Db, task: AgentTask, turn_id: uuid.UUID) -> None:
    task.follow_up_turn_id = turn_id
    db.flush()


def overdue(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    """Open tasks past their deadline."""
    return (
        db.execute(
            select(AgentTask.id)
            .where(_OPEN, AgentTask.deadline < func.now())
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        .scalars()
        .all()
    )


def lost(db: Db, *, republish_after_s: float, limit: int = 100) -> Sequence[uuid.UUID]:
    """Open python and A2A tasks to send again: never claimed for a while, or their runner
    stopped renewing its lease (killed). Marks them so that the next pass waits again."""
    wait = timedelta(seconds=republish_after_s)
    since = func.coalesce(AgentTask.lease_until, AgentTask.created_at + wait)
    ids = (
        db.execute(
            select(AgentTask.id)
            .where(
                _OPEN,
                AgentTask.kind.in_([AgentKind.PYTHON.value, AgentKind.A2A.value]),
                since < func.now(),
            )
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        .scalars()
        .all()
    )
    if ids:
        db.execute(
            update(AgentTask)
            .where(AgentTask.id.in_(ids), AgentTask.status == TaskStatus.SUBMITTED)
            .values(lease_until=func.now() + wait)
        )
    return ids


def orphaned(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    """Open foreground tasks whose calling turn has ended (cancelled, failed, past its
    deadline): nobody waits for their answer."""
    return (
        db.execute(
            select(AgentTask.id)
            .join(Turn, Turn.id == AgentTask.turn_id)
            .where(
                _OPEN,
                AgentTask.mode == AgentMode.FOREGROUND.value,
                Turn.status.in_(TERMINAL_TURN_STATUSES),
            )
            .limit(limit)
        )
        .scalars()
        .all()
    )


def children_ended(db: Db, *, limit: int = 100) -> Sequence[tuple[uuid.UUID, uuid.UUID]]:
    """(task, child turn) of open `llm` tasks whose child turn has ended."""
    rows = db.execute(
        select(AgentTask.id, Turn.id)
        .join(Turn, Turn.id == AgentTask.child_turn_id)
        .where(_OPEN, Turn.status.in_(TERMINAL_TURN_STATUSES))
        .limit(limit)
    ).all()
    return [(r[0], r[1]) for r in rows]


class EndedTaskDoc(TypedDict):
    """An ended task as JSON, as a follow-up turn's claim reads it."""

    id: str
    agent: str
    status: str
    result: JsonValue
    error: ErrorDoc | None


@dataclass(frozen=True, slots=True)
class EndedTask:
    """What a follow-up turn's model reads of its task."""

    id: uuid.UUID
    agent: str
    status: TaskStatus
    result: JsonValue
    error: ErrorDoc | None
