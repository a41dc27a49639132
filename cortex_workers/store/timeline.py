"""The execution timeline of turns: one row per event, in the order it was recorded.

Written by the few places that know a fact (the route, a retry, a reservation, a tool result,
the end of the turn), read by `GET /v1/turns/{tid}/timeline`. See docs/checkpoints.md.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Table,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.orm import Session as Db

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
    data: Mapped[dict[str, Any]]
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
    data: dict[str, Any]


def record(
    db: Db, turn_id: uuid.UUID, kind: TimelineKind, data: Mapping[str, Any], *, step: int | None
) -> None:
    """Append an event (in the caller's transaction)."""
    db.execute(
        insert(timeline_table).values(turn_id=turn_id, step=step, kind=kind, data=dict(data))
    )


def append(
    conn: Connection,
    turn_id: uuid.UUID,
    events: Sequence[tuple[TimelineKind, Mapping[str, Any]]],
    *,
    step: int | None,
) -> None:
    """Append events, in order, on a connection of the caller's (a hand-written statement:
    the hot path records a few per model step)."""
    rows = [
        {
            "turn_id": turn_id,
            "step": step,
            "kind": kind.value,
            "data": json.dumps(data, default=str),
        }
        for kind, data in events
    ]
    conn.execute(_APPEND, rows)


_APPEND = text(
    "INSERT INTO timeline_events (turn_id, step, kind, data) "
    "VALUES (:turn_id, :step, :kind, CAST(:data AS JSONB))"
)


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
