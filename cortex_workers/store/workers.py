"""Worker liveness in Postgres: one `workers` row per live worker process, its `seen_at`
refreshed by the process's heartbeat thread; and what a leased step's holder being gone means
in SQL, shared by the claim and the reconciler so that both decide alike. See
docs/reliability.md (worker liveness).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_, select, text, tuple_, update
from sqlalchemy.orm import Session as Db

from ..vocabulary import StepStatus
from .models import Worker, steps_table, workers_table

_s, _w = steps_table.c, workers_table.c

BEAT_SESSION = "-c synchronous_commit=off"
"""A beat does not wait for its WAL flush (a beat lost in a crash is only a missed beat), so a
busy disk does not make a live worker look gone."""

HEARTBEAT_SQL = (
    "INSERT INTO workers (holder, hostname, pid) VALUES (%(holder)s, %(hostname)s, %(pid)s) "
    "ON CONFLICT (holder) DO UPDATE SET seen_at = now()"
)
"""One beat (run on the heartbeat's own connection, autocommit)."""

FORGET_SQL = "DELETE FROM workers WHERE holder = %(holder)s"
"""A worker that stops cleanly forgets itself: its leases are free at once."""


def holder_gone(liveness: Any) -> Any:
    """SQL: the step's holder is named and has not beaten within `liveness` (an interval
    expression), and the database itself has been up that long (right after a Postgres
    restart every heartbeat is stale: no step is taken until the workers had time to beat)."""
    alive = exists().where(_w.holder == _s.holder, _w.seen_at > func.now() - liveness)
    return and_(
        _s.holder.is_not(None),
        ~alive,
        func.pg_postmaster_start_time() < func.now() - liveness,
    )


def takeable(liveness: Any) -> Any:
    """SQL: a leased step another worker may take: its lease ran out; or its holder is gone
    (`holder_gone`) and its lease was not renewed within `liveness` either: a process whose
    renewer still reaches Postgres keeps its steps even while its heartbeat is late."""
    not_renewed = func.coalesce(_s.renewed_at, _s.lease_until) < func.now() - liveness
    return and_(
        _s.status == StepStatus.LEASED,
        or_(_s.lease_until < func.now(), and_(holder_gone(liveness), not_renewed)),
    )


def hand_back(db: Db, held: list[tuple[uuid.UUID, int]]) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """Give leased steps back as pending, due now (a draining worker); returns (step, turn,
    kind) of those still ours. The next claim counts a new attempt, which fences us out."""
    if not held:
        return []
    rows = db.execute(
        update(steps_table)
        .where(tuple_(_s.id, _s.attempt).in_(held), _s.status == StepStatus.LEASED)
        .values(
            status=StepStatus.PENDING,
            lease_until=None,
            holder=None,
            available_at=func.now(),
            published_at=func.now(),
        )
        .returning(_s.id, _s.turn_id, _s.kind)
    ).all()
    return [(r.id, r.turn_id, str(r.kind)) for r in rows]


def live_workers(db: Db, *, liveness_s: float) -> list[Worker]:
    """Worker processes that beat within `liveness_s`."""
    cutoff = func.now() - timedelta(seconds=liveness_s)
    return list(db.execute(select(Worker).where(Worker.seen_at > cutoff)).scalars())


def forget_dead(db: Db, *, older_than_s: float) -> int:
    """Drop the rows of workers silent for `older_than_s` and holding no step."""
    held = select(_s.id).where(_s.holder == _w.holder, _s.status == StepStatus.LEASED)
    cutoff = func.now() - timedelta(seconds=older_than_s)
    result = db.execute(
        delete(workers_table).where(_w.seen_at < cutoff, ~held.exists()).returning(_w.holder)
    )
    return len(result.all())


def interval(seconds: float) -> Any:
    """A constant interval of `seconds` in SQL."""
    return text(f"interval '{float(seconds)} seconds'")


__all__ = [
    "FORGET_SQL",
    "HEARTBEAT_SQL",
    "forget_dead",
    "hand_back",
    "holder_gone",
    "interval",
    "live_workers",
    "takeable",
]
