"""The state of each queue as Postgres records it: depth, oldest age and steps in flight.

Postgres is the queue of record (docs/reliability.md): a step committed and not yet claimed is
`pending` whether or not its delivery is still in Redis, so these numbers hold when the broker
lost a message or is down. One GROUP BY over the open steps, which the partial index
`ix_steps_open` covers; `cortex-workers status` and the API's `/metrics` queue gauges both read
it (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session as Db
from sqlalchemy.orm import sessionmaker

from ..observability.metrics import QueueStats
from ..queues import QUEUES, step_route
from ..vocabulary import StepKind, StepStatus, TurnStatus
from .db import autocommit
from .models import Turn, steps_table
from .sql import const

__all__ = ["QueueStats", "queue_stats", "read_queue_stats", "turn_counts"]

_s = steps_table.c
_PENDING, _LEASED = const(StepStatus.PENDING), const(StepStatus.LEASED)
_waiting = and_(_s.status == _PENDING, _s.available_at <= func.now())

_QUEUE_STATS = (
    select(
        _s.kind,
        func.count().filter(_waiting).label("depth"),
        func.min(_s.available_at).filter(_waiting).label("oldest"),
        func.count().filter(_s.status == _LEASED).label("in_flight"),
        func.now().label("now"),
    )
    # written out, not bound, so the planner matches the partial index `ix_steps_open`
    .where(_s.status.in_([_PENDING, _LEASED]))
    .group_by(_s.kind)
)


def queue_stats(db: Db) -> list[QueueStats]:
    """Every queue's statistics (a queue without open steps reads zeros), in `QUEUES` order.

    depth: steps pending and available now (committed, their backoff over, not yet claimed);
    oldest age: seconds since the oldest of those became available; in flight: steps leased.
    """
    depth = dict.fromkeys(QUEUES, 0)
    in_flight = dict.fromkeys(QUEUES, 0)
    oldest_age = dict.fromkeys(QUEUES, 0.0)
    for row in db.execute(_QUEUE_STATS):
        queue = step_route(StepKind(row.kind)).queue
        depth[queue] += row.depth
        in_flight[queue] += row.in_flight
        oldest: datetime | None = row.oldest
        if oldest is not None:
            age = max((row.now - oldest).total_seconds(), 0.0)
            oldest_age[queue] = max(oldest_age[queue], age)
    return [
        QueueStats(
            queue=q.value, depth=depth[q], oldest_age_s=oldest_age[q], in_flight=in_flight[q]
        )
        for q in QUEUES
    ]


def read_queue_stats(sessions: sessionmaker[Db]) -> Sequence[QueueStats]:
    """`queue_stats` on a session of its own (one statement, no transaction): the `fetch` of a
    `QueueStatsCollector` (`lambda: read_queue_stats(get_runtime().db)`)."""
    with autocommit(sessions) as db:
        return queue_stats(db)


def turn_counts(db: Db, *, within_s: float = 3600.0) -> dict[TurnStatus, int]:
    """Turns created in the last `within_s` seconds, by status (every status, zeros included)."""
    counts = dict.fromkeys(TurnStatus, 0)
    rows = db.execute(
        select(Turn.status, func.count())
        .where(Turn.created_at > func.now() - timedelta(seconds=within_s))
        .group_by(Turn.status)
    )
    for status, n in rows.tuples():
        counts[TurnStatus(status)] = n
    return counts
