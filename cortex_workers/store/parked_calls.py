"""Parked calls (migration 0022): a tool call its MCP server answered with a task. The tool
step stays leased, held by no worker, until a poll finds the task ended and stores its result
(docs/mcp.md, "Tools that answer with a task").

One row per tool call, written with the hold on its step in one statement (`park`). A poll
takes the row by moving its `next_poll_at` past the poll's own duration (`take`), so a
duplicated delivery finds nothing to do; the reconciler sends again the polls of rows whose
`next_poll_at` is long past (`lost`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    and_,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.orm import Session as Db

from ..messages import JsonObject
from ..vocabulary import StepStatus, TurnStatus
from .db import Executor
from .models import Base, Step, Turn
from .repo import storable_json
from .workers import interval

EARLY_S = 1.0
"""A poll delivered this much before its row is due still takes it (clocks differ a little)."""


class ParkedCall(Base):
    """A tool call waiting for its MCP server's task (see the module's doc)."""

    __tablename__ = "parked_calls"
    __table_args__ = (
        Index("ix_parked_calls_due", "next_poll_at", postgresql_where=text("ended_at IS NULL")),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tool_call_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tool_calls.id", ondelete="CASCADE"), unique=True
    )
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column()
    tenant_id: Mapped[uuid.UUID] = mapped_column()
    step_id: Mapped[uuid.UUID] = mapped_column()
    step_attempt: Mapped[int] = mapped_column(Integer)
    step_no: Mapped[int] = mapped_column(Integer)
    model_step_no: Mapped[int] = mapped_column(Integer)
    call_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    arguments: Mapped[JsonObject] = mapped_column(JSONB)
    server: Mapped[str] = mapped_column(String(40))
    task_id: Mapped[str] = mapped_column(String(500))
    poll_s: Mapped[float] = mapped_column(Float)
    next_poll_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    deadline: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    polls: Mapped[int] = mapped_column(Integer, server_default="0")
    failures: Mapped[int] = mapped_column(Integer, server_default="0")
    """Polls in a row whose server did not answer."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


@dataclass(frozen=True, slots=True)
class NewParked:
    """A tool step's call, answered with task `task_id` of `server`."""

    tool_call_id: uuid.UUID
    turn_id: uuid.UUID
    session_id: uuid.UUID
    tenant_id: uuid.UUID
    step_id: uuid.UUID
    step_attempt: int
    step_no: int
    model_step_no: int
    call_id: str
    name: str
    arguments: JsonObject
    server: str
    task_id: str
    poll_s: float
    wait_s: float
    hold_s: float
    """How long the step stays leased: past the task's deadline, for the poll that ends it."""


def park(db: Executor, new: NewParked) -> uuid.UUID | None:
    """Hold the step (leased by attempt `step_attempt`, no worker named, until `hold_s` from
    now) and record the call's task, in one statement; None when the step was not ours."""
    held = (
        update(Step)
        .where(
            Step.id == new.step_id,
            Step.attempt == new.step_attempt,
            Step.status == StepStatus.LEASED,
        )
        .values(lease_until=func.now() + timedelta(seconds=new.hold_s), holder=None)
        .returning(Step.id)
        .cte("held")
    )
    columns = {
        "id": literal(uuid.uuid4()),
        "tool_call_id": literal(new.tool_call_id),
        "turn_id": literal(new.turn_id),
        "session_id": literal(new.session_id),
        "tenant_id": literal(new.tenant_id),
        "step_id": held.c.id,
        "step_attempt": literal(new.step_attempt),
        "step_no": literal(new.step_no),
        "model_step_no": literal(new.model_step_no),
        "call_id": literal(new.call_id),
        "name": literal(new.name),
        "arguments": literal(storable_json(new.arguments), JSONB),
        "server": literal(new.server),
        "task_id": literal(new.task_id[:500]),
        "poll_s": literal(new.poll_s),
        "next_poll_at": func.now() + timedelta(seconds=new.poll_s),
        "deadline": func.now() + timedelta(seconds=new.wait_s),
    }
    stmt = insert(ParkedCall).from_select(
        list(columns), select(*[c.label(k) for k, c in columns.items()]).select_from(held)
    )
    renewed = {k: stmt.excluded[k] for k in columns if k not in ("id", "tool_call_id")}
    stmt = stmt.on_conflict_do_update(  # a later attempt's call of the same tool call
        index_elements=[ParkedCall.tool_call_id],
        set_={**renewed, "polls": 0, "failures": 0, "ended_at": None},
    )
    return db.execute(stmt.returning(ParkedCall.id)).scalar_one_or_none()


@dataclass(frozen=True, slots=True)
class Taken:
    """A parked call a poll now looks at, and what it must know first."""

    call: ParkedCall
    overdue: bool
    """Past its deadline."""
    waited_for: bool
    """Its step is still leased by the attempt that parked it, and its turn still running:
    someone waits for the result."""


def take(db: Db, parked_id: uuid.UUID, *, busy_s: float) -> Taken | None:
    """The open call, due now, with its next poll moved `busy_s` ahead (a duplicated
    delivery takes nothing); None when it ended or is not due."""
    waited_for = (
        select(Step.id)
        .join(Turn, Turn.id == Step.turn_id)
        .where(
            Step.id == ParkedCall.step_id,
            Step.attempt == ParkedCall.step_attempt,
            Step.status == StepStatus.LEASED,
            Turn.status == TurnStatus.RUNNING,
        )
        .exists()
    )
    row = db.execute(
        update(ParkedCall)
        .where(
            ParkedCall.id == parked_id,
            ParkedCall.ended_at.is_(None),
            ParkedCall.next_poll_at <= func.now() + interval(EARLY_S),
        )
        .values(next_poll_at=func.now() + timedelta(seconds=busy_s), polls=ParkedCall.polls + 1)
        .returning(ParkedCall, ParkedCall.deadline < func.now(), waited_for)
    ).one_or_none()
    if row is None:
        return None
    return Taken(call=row[0], overdue=bool(row[1]), waited_for=bool(row[2]))


def again(db: Db, parked_id: uuid.UUID, *, after_s: float, failures: int) -> None:
    """The task is still working (or its server did not answer): the next poll is due in
    `after_s`."""
    db.execute(
        update(ParkedCall)
        .where(ParkedCall.id == parked_id, ParkedCall.ended_at.is_(None))
        .values(next_poll_at=func.now() + timedelta(seconds=after_s), failures=failures)
    )


def end(db: Db, parked_id: uuid.UUID) -> bool:
    """Mark the call ended; False when it had ended already."""
    return (
        db.execute(
            update(ParkedCall)
            .where(ParkedCall.id == parked_id, ParkedCall.ended_at.is_(None))
            .values(ended_at=func.now())
            .returning(ParkedCall.id)
        ).scalar_one_or_none()
        is not None
    )


def lost(db: Db, *, after_s: float, limit: int = 100) -> Sequence[uuid.UUID]:
    """Open calls whose poll is `after_s` overdue (its message was lost, or its worker died):
    due again now, so that the next pass waits `after_s` again before sending another."""
    late = and_(
        ParkedCall.ended_at.is_(None),
        ParkedCall.next_poll_at < func.now() - timedelta(seconds=after_s),
    )
    ids = (
        db.execute(select(ParkedCall.id).where(late).limit(limit).with_for_update(skip_locked=True))
        .scalars()
        .all()
    )
    if ids:
        db.execute(update(ParkedCall).where(ParkedCall.id.in_(ids)).values(next_poll_at=func.now()))
    return ids
