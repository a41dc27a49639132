"""Reads of spend: a tenant's budget counters, a session's tokens, usage grouped for reports."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Connection, func, select, text
from sqlalchemy.orm import Session

from ..vocabulary import ReservationStatus
from .budget_models import counters_table
from .models import Session as SessionRow

GroupBy = Literal["day", "model", "user", "session"]


@dataclass(frozen=True, slots=True)
class Counter:
    """One scope's counter in one window (zeros when nothing was reserved there yet)."""

    spent: int = 0
    reserved: int = 0
    alerted_at: datetime | None = None


def counter(conn: Connection, key: str, window_start: datetime) -> Counter:
    row = conn.execute(
        text(
            "SELECT spent, reserved, alerted_at FROM budget_counters "
            "WHERE scope = :key AND window_start = :start"
        ),
        {"key": key, "start": window_start},
    ).first()
    return Counter(row.spent, row.reserved, row.alerted_at) if row is not None else Counter()


def counters(conn: Connection, keys: list[tuple[str, datetime]]) -> dict[str, Counter]:
    """Several scopes' counters in one read, by key (those not there yet: absent)."""
    if not keys:
        return {}
    clauses = " OR ".join(f"(scope = :k{i} AND window_start = :s{i})" for i in range(len(keys)))
    params: dict[str, object] = {}
    for i, (key, start) in enumerate(keys):
        params[f"k{i}"], params[f"s{i}"] = key, start
    rows = conn.execute(
        text(f"SELECT scope, spent, reserved, alerted_at FROM budget_counters WHERE {clauses}"),
        params,
    )
    return {r.scope: Counter(r.spent, r.reserved, r.alerted_at) for r in rows}


def session_and_counters(
    db: Session, session_id: uuid.UUID, tenant_id: uuid.UUID, keys: list[tuple[str, datetime]]
) -> tuple[SessionRow | None, dict[str, Counter]]:
    """The tenant's session and several scopes' counters, in one read (a counter not there
    yet: absent)."""
    c = counters_table.c
    columns = [
        select(func.json_build_array(c.spent, c.reserved, c.alerted_at))
        .where(c.scope == key, c.window_start == start)
        .scalar_subquery()
        for key, start in keys
    ]
    row = db.execute(
        select(SessionRow, *columns).where(
            SessionRow.id == session_id, SessionRow.tenant_id == tenant_id
        )
    ).first()
    if row is None:
        return None, {}
    found = {}
    for (key, _start), counter in zip(keys, row[1:], strict=True):
        if counter is not None:
            spent, reserved, alerted = counter
            at = datetime.fromisoformat(alerted) if alerted else None
            found[key] = Counter(int(spent), int(reserved), at)
    return row[0], found


@dataclass(frozen=True, slots=True)
class UsageRow:
    key: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_micros: int


_KEYS: dict[GroupBy, str] = {
    "day": "to_char(created_at AT TIME ZONE :tz, 'YYYY-MM-DD')",
    "model": "provider || ':' || model",
    "user": "COALESCE(\"user\", '')",
    "session": "COALESCE(CAST(session_id AS TEXT), '')",
}


def usage(
    conn: Connection,
    tenant_id: uuid.UUID,
    *,
    start: datetime,
    end: datetime,
    group_by: GroupBy,
    timezone: str,
) -> list[UsageRow]:
    """The tenant's settled model calls made in [start, end), of turns and of jobs alike,
    grouped (`day` in `timezone`; a job's calls have no user nor session: key "")."""
    key = _KEYS[group_by]  # one of four fixed expressions, never caller text
    rows = conn.execute(
        text(
            f"SELECT {key} AS key, count(*) AS calls, "
            "COALESCE(sum(input_tokens), 0) AS input_tokens, "
            "COALESCE(sum(output_tokens), 0) AS output_tokens, "
            "COALESCE(sum(cost_micros), 0) AS cost_micros "
            "FROM budget_reservations "
            "WHERE tenant_id = :tenant_id AND status = :settled "
            "AND created_at >= :start AND created_at < :end "
            "GROUP BY 1 ORDER BY 1"
        ),
        {
            "tenant_id": tenant_id,
            "settled": ReservationStatus.SETTLED.value,
            "start": start,
            "end": end,
            "tz": timezone,
        },
    )
    return [
        UsageRow(r.key, r.calls, int(r.input_tokens), int(r.output_tokens), int(r.cost_micros))
        for r in rows
    ]
