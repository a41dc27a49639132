"""Scheduled turns: the `schedules` table and all its SQL (migration 0009).

A schedule holds the time of its next firing (`next_run_at`). Firing claims due rows with
`FOR UPDATE SKIP LOCKED` and moves `next_run_at` past now in the same transaction as the turn
it creates, so two sweeps (two beats) never fire the same time twice, and a time missed while
nothing ran fires once.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    Row,
    String,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from .db import Executor
from .models import Base


class RefusalDoc(TypedDict):
    """Why a firing stored no turn (`schedules.last_error`, migration 0021)."""

    code: str
    message: str
    at: str
    """When it was refused (ISO 8601)."""


class Schedule(Base):
    __tablename__ = "schedules"
    __table_args__ = (
        CheckConstraint("(cron IS NULL) <> (every_s IS NULL)", name="ck_schedules_one_rule"),
        CheckConstraint("every_s >= 1", name="ck_schedules_every_s"),
        Index("ix_schedules_session", "session_id", "created_at"),
        Index("ix_schedules_next_run_at", "next_run_at"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    session_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    content: Mapped[str] = mapped_column(Text)
    cron: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str | None] = mapped_column(String(64))
    every_s: Mapped[float | None] = mapped_column(Float)
    next_run_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_turn_id: Mapped[uuid.UUID | None]
    fired: Mapped[int] = mapped_column(Integer, server_default="0")
    last_error: Mapped[RefusalDoc | None] = mapped_column(JSONB)
    """The last firing's refusal; cleared by the next firing that stores its turn."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


_s = Schedule.__table__.c


def insert_schedule(
    db: Executor,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    content: str,
    cron: str | None,
    timezone: str | None,
    every_s: float | None,
    next_run_at: datetime,
) -> Schedule:
    schedule_id = uuid.uuid4()
    db.execute(
        insert(Schedule).values(
            id=schedule_id,
            tenant_id=tenant_id,
            session_id=session_id,
            content=content,
            cron=cron,
            timezone=timezone,
            every_s=every_s,
            next_run_at=next_run_at,
        )
    )
    row = get_schedule(db, schedule_id, tenant_id=tenant_id)
    assert row is not None
    return row


def get_schedule(db: Executor, schedule_id: uuid.UUID, *, tenant_id: uuid.UUID) -> Schedule | None:
    row = db.execute(
        select(Schedule.__table__).where(_s.id == schedule_id, _s.tenant_id == tenant_id)
    ).first()
    return _of(row) if row is not None else None


def session_schedules(
    db: Executor, session_id: uuid.UUID, *, tenant_id: uuid.UUID
) -> list[Schedule]:
    rows = db.execute(
        select(Schedule.__table__)
        .where(_s.session_id == session_id, _s.tenant_id == tenant_id)
        .order_by(_s.created_at, _s.id)
    ).all()
    return [_of(r) for r in rows]


def delete_schedule(db: Executor, schedule_id: uuid.UUID, *, tenant_id: uuid.UUID) -> bool:
    """Remove it (waiting for a firing in progress to commit); False when there is none."""
    gone = db.execute(
        delete(Schedule).where(_s.id == schedule_id, _s.tenant_id == tenant_id).returning(_s.id)
    ).first()
    return gone is not None


def claim_due(db: Executor, *, limit: int) -> list[Schedule]:
    """Due schedules, locked for this transaction; those another sweep holds are skipped."""
    rows = db.execute(
        select(Schedule.__table__)
        .where(_s.next_run_at <= func.now())
        .order_by(_s.next_run_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    return [_of(r) for r in rows]


def mark_fired(
    db: Executor,
    schedule_id: uuid.UUID,
    *,
    fired_at: datetime,
    turn_id: uuid.UUID,
    next_run_at: datetime,
) -> None:
    db.execute(
        update(Schedule)
        .where(_s.id == schedule_id)
        .values(
            last_run_at=fired_at,
            last_turn_id=turn_id,
            next_run_at=next_run_at,
            fired=_s.fired + 1,
            last_error=None,
        )
    )


def refuse(
    db: Executor, schedule_id: uuid.UUID, *, error: RefusalDoc, next_run_at: datetime
) -> None:
    """A firing refused before its turn was stored: why, and when it fires next."""
    db.execute(
        update(Schedule)
        .where(_s.id == schedule_id)
        .values(last_error=error, next_run_at=next_run_at)
    )


def defer(db: Executor, schedule_id: uuid.UUID, *, until: datetime) -> None:
    """Move a schedule whose firing failed to `until` (its fire time is lost)."""
    db.execute(update(Schedule).where(_s.id == schedule_id).values(next_run_at=until))


def _of(row: Row[Any]) -> Schedule:
    return Schedule(**dict(row._mapping))
