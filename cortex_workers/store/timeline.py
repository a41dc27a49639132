"""The execution timeline of turns: one row per event, in the order it was recorded.

What a step learns goes into its record and is written with the step's ending, by the one
statement that ends it (`store.step_commit`, `store.commit_sql.timeline`); events of what is
not a step's ending (a turn the reconciler failed, an agent's handoff) by the same piece
(`step_commit.write_record`). Read by `GET /v1/turns/{tid}/timeline`. See docs/checkpoints.md.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    func,
    select,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.orm import Session as Db

from ..messages import JsonObject
from ..vocabulary import TimelineKind
from .models import Base, one_of


class TimelineEvent(Base):
    """One event of a turn's execution: `step` is the step's number (None: the turn's)."""

    __tablename__ = "timeline_events"
    __table_args__ = (
        Index("ix_timeline_events_turn", "turn_id", "id"),
        one_of("kind", TimelineKind, table="timeline_events"),
    )
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    turn_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    step: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[TimelineKind]
    data: Mapped[JsonObject]
    at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp()
    )


timeline_table = cast(Table, TimelineEvent.__table__)
_t = timeline_table.c


@dataclass(frozen=True, slots=True)
class Event:
    """An event as the API returns it."""

    at: datetime
    step: int | None
    kind: TimelineKind
    data: JsonObject
    """The facts of its kind."""


def of_turn(db: Db, turn_id: uuid.UUID) -> list[Event]:
    """The turn's events, oldest first."""
    rows = db.execute(
        select(_t.at, _t.step, _t.kind, _t.data).where(_t.turn_id == turn_id).order_by(_t.id)
    ).all()
    return [Event(r.at, r.step, TimelineKind(r.kind), r.data) for r in rows]


def recoveries(db: Db, turn_id: uuid.UUID, action: str) -> list[int | None]:
    """The steps of the turn's recovery events of `action`, oldest first."""
    rows = db.execute(
        select(_t.step)
        .where(
            _t.turn_id == turn_id,
            _t.kind == TimelineKind.RECOVERY,
            _t.data["action"].astext == action,
        )
        .order_by(_t.id)
    ).all()
    return [r.step for r in rows]
