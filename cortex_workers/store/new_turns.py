"""A new turn, numbered in its session and stored in one statement: with its user message and
first model step when it starts at once, queued behind the session's active turn otherwise.

`turns.submit` takes the session lock (`lock_session`) and calls `insert_turn`, or, for a
session that looks idle, tries `start_turn_if_idle`, which takes the lock itself and commits
on its own. Both store the turn's `traceparent`: the trace context of the API request that
created it (`observability.tracing.current_traceparent()`), None when tracing is off.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from sqlalchemy import Interval, Table, bindparam, func, literal, select, true, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session as Db
from sqlalchemy.sql.elements import ColumnElement

from ..messages import JsonObject
from ..vocabulary import StepKind, StepStatus, TurnStatus
from .db import Executor
from .models import messages_table, sessions_table, steps_table, turns_table
from .repo import storable_text
from .sql import Precompiled, const, exists_in

_m, _ss, _tt, _st = messages_table.c, sessions_table.c, turns_table.c, steps_table.c


class LockParams(TypedDict):
    session_id: uuid.UUID
    tenant_id: uuid.UUID


class TurnParams(LockParams):
    """The parameters of a statement that stores a queued turn."""

    turn_id: uuid.UUID
    content: str
    idempotency_key: str | None
    request_hash: str | None
    traceparent: str | None
    user: str | None
    route: JsonObject | None
    options: JsonObject | None


class StartedTurnParams(TurnParams):
    """The parameters of a statement that stores a turn that starts at once: also its
    deadline's distance, the ids of its user message and first model step, and the
    message's images."""

    timeout: timedelta
    images: list[str] | None
    message_id: uuid.UUID
    step_id: uuid.UUID


_LOCK_SESSION = Precompiled(
    select(_ss.id)
    .where(_ss.id == bindparam("session_id"), _ss.tenant_id == bindparam("tenant_id"))
    .with_for_update(),
    params=LockParams,
)

_SESSION_ID: Any = bindparam("session_id")
_NULLABLE_JSON = JSONB(none_as_null=True)
"""A value that is absent for most turns: None is SQL NULL (not JSON null)."""


def _when_idle() -> tuple[Any, list[Any]]:
    """The session's lock (`locked`), then its active turns' locks, and the conditions under
    which the session is idle: it has no active turn, and its locked row is the one the
    statement's snapshot saw (see `_insert_turn`)."""
    locked = (
        select(_ss.id, _ss.last_turn_seq)
        .where(_ss.id == _SESSION_ID, _ss.tenant_id == bindparam("tenant_id"))
        .with_for_update()
        .cte("locked")
    )
    active = (
        select(_tt.id)
        .where(
            _tt.session_id == _SESSION_ID,
            _tt.status.in_([const(s) for s in (TurnStatus.QUEUED, TurnStatus.RUNNING)]),
            exists_in(locked),
        )
        .with_for_update()
        .cte("active")
    )
    as_seen = select(_ss.last_turn_seq).where(_ss.id == _SESSION_ID).scalar_subquery()
    idle = [select(locked.c.last_turn_seq).scalar_subquery() == as_seen, ~exists_in(active)]
    return locked, idle


def _numbered(*, starts: bool, where: list[Any]) -> Any:
    """`UPDATE sessions … RETURNING`: the turn's seq and, when it starts, its user message's
    seq and its first model call's index."""
    values: dict[str, ColumnElement[int]] = {"last_turn_seq": _ss.last_turn_seq + 1}
    if starts:
        values.update(last_message_seq=_ss.last_message_seq + 1, model_calls=_ss.model_calls + 1)
    return (
        update(sessions_table)
        .where(_ss.id == _SESSION_ID, *where)
        .values(**values)
        .returning(_ss.id, _ss.last_turn_seq, _ss.last_message_seq, _ss.model_calls)
        .cte("numbered")
    )


def _rows(numbered: Any, *, starts: bool) -> dict[Table, dict[str, ColumnElement[Any]]]:
    """The rows to store, by table: the turn and, when it starts, its user message and first
    model step."""
    n = numbered.c
    turn_id = bindparam("turn_id", type_=_tt.id.type)
    content = bindparam("content", type_=_tt.content.type)
    status = TurnStatus.RUNNING if starts else TurnStatus.QUEUED
    turn: dict[str, ColumnElement[Any]] = {
        "id": turn_id,
        "tenant_id": bindparam("tenant_id", type_=_tt.tenant_id.type),
        "session_id": n.id,
        "seq": n.last_turn_seq,
        "status": literal(status, _tt.status.type),
        "content": content,
        "idempotency_key": bindparam("idempotency_key", type_=_tt.idempotency_key.type),
        "request_hash": bindparam("request_hash", type_=_tt.request_hash.type),
        "traceparent": bindparam("traceparent", type_=_tt.traceparent.type),
        "user": bindparam("user", type_=_tt.user.type),
        "route": bindparam("route", type_=_tt.route.type),
        "options": bindparam("options", type_=_NULLABLE_JSON),
    }
    if not starts:
        return {turns_table: turn}
    # the time it starts, after the session lock (`now()` is when the transaction began)
    turn["started_at"] = func.clock_timestamp()
    turn["deadline"] = func.clock_timestamp() + bindparam("timeout", type_=Interval())
    message = {
        "id": bindparam("message_id", type_=_m.id.type),
        "session_id": n.id,
        "seq": n.last_message_seq,
        "role": literal("user", _m.role.type),
        "content": content,
        "turn_id": turn_id,
        "images": bindparam("images", type_=_NULLABLE_JSON),
    }
    step = {
        "id": bindparam("step_id", type_=_st.id.type),
        "turn_id": turn_id,
        "step_no": literal(1, _st.step_no.type),
        "kind": literal(StepKind.MODEL, _st.kind.type),
        "status": literal(StepStatus.PENDING, _st.status.type),
        "published_at": func.now(),
        "call_index": n.model_calls - 1,
    }
    return {turns_table: turn, messages_table: message, steps_table: step}


def _insert_turn(starts: bool, *, if_idle: bool = False) -> Any:
    """Number a turn and store it, in one statement. A turn that starts at once also takes
    its user message's seq and its first model call's index in the same `UPDATE sessions`,
    and its user message and first model step are stored with it. Returns the numbers.

    `if_idle`: the statement takes the session's lock itself and stores the turn (started)
    only if the session has no queued or running turn. It locks the session, then its active
    turns: a turn that ended while it waited for a lock is re-read at its newest version and
    no longer counts. A turn stored meanwhile is not in the statement's snapshot, but it
    moved the session's `last_turn_seq`, so a locked row that differs from the snapshot's
    also stores nothing. The first column, `found`, is NULL when there is no such session
    (of the tenant); the numbers are NULL when nothing was stored."""
    locked, idle = _when_idle() if if_idle else (None, [])
    numbered = _numbered(starts=starts, where=idle)
    rows = _rows(numbered, starts=starts)
    inserts = [
        insert(table).from_select(  # the columns not named here take their server defaults
            list(row), select(*row.values()).select_from(numbered), include_defaults=False
        )
        for table, row in rows.items()
    ]
    n = numbered.c
    counters = select(n.last_turn_seq, n.last_message_seq, n.model_calls)
    if locked is not None:
        counters = select(locked.c.id.label("found"), *counters.selected_columns).select_from(
            locked.outerjoin(numbered, true())
        )
    return counters.add_cte(
        *(stmt.cte(f"new_{table.name}") for stmt, table in zip(inserts, rows, strict=True))
    )


_INSERT_TURN = {
    False: Precompiled(_insert_turn(False), params=TurnParams),
    True: Precompiled(_insert_turn(True), params=StartedTurnParams),
}
_START_TURN_IF_IDLE = Precompiled(_insert_turn(True, if_idle=True), params=StartedTurnParams)


def _images(options: JsonObject | None) -> list[str] | None:
    """The images of the turn's user message, from its options (`turns.options`)."""
    images = (options or {}).get("images")
    return [str(i) for i in images] if isinstance(images, list) and images else None


def lock_session(db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID) -> bool:
    """Take the tenant's session's row lock; False when there is no such session."""
    params = LockParams(session_id=session_id, tenant_id=tenant_id)
    return _LOCK_SESSION.first(db, params) is not None


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A turn just stored: what the 202 response says of it, and its first model step when
    it started at once."""

    id: uuid.UUID
    session_id: uuid.UUID
    seq: int
    status: TurnStatus
    first_step_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Started:
    """`start_turn_if_idle` stored the turn, started, with its user message and first step."""

    turn: NewTurn


@dataclass(frozen=True, slots=True)
class SessionBusy:
    """`start_turn_if_idle` stored nothing: the session has an active turn, or changed while
    the statement waited for its lock. Submit the turn under the session's lock instead."""


@dataclass(frozen=True, slots=True)
class NoSuchSession:
    """`start_turn_if_idle` stored nothing: the tenant has no such session."""


StartOutcome = Started | SessionBusy | NoSuchSession
"""What `start_turn_if_idle` did."""


def start_turn_if_idle(
    db: Executor,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    timeout_s: float,
    content: str,
    request_hash: str | None = None,
    traceparent: str | None = None,
    user: str | None = None,
    route: JsonObject | None = None,
    idempotency_key: str | None = None,
    options: JsonObject | None = None,
) -> StartOutcome:
    """Store a turn that starts at once, with its user message and first model step, if the
    tenant's session has no active turn: one statement that commits on its own (see
    `_insert_turn`). A key another turn of the tenant holds fails it (`IntegrityError`)."""
    params = StartedTurnParams(
        session_id=session_id,
        tenant_id=tenant_id,
        turn_id=uuid.uuid4(),
        content=storable_text(content),
        idempotency_key=idempotency_key,
        request_hash=request_hash,
        traceparent=traceparent,
        user=user,
        route=route,
        options=options,
        images=_images(options),
        timeout=timedelta(seconds=timeout_s),
        message_id=uuid.uuid4(),
        step_id=uuid.uuid4(),
    )
    row = _START_TURN_IF_IDLE.first(db, params)
    if row is None:
        return NoSuchSession()
    if row.last_turn_seq is None:
        return SessionBusy()
    return Started(
        NewTurn(
            id=params["turn_id"],
            session_id=session_id,
            seq=row.last_turn_seq,
            status=TurnStatus.RUNNING,
            first_step_id=params["step_id"],
        )
    )


def insert_turn(
    db: Db,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    start_timeout_s: float | None,
    content: str,
    idempotency_key: str | None = None,
    request_hash: str | None = None,
    traceparent: str | None = None,
    user: str | None = None,
    route: JsonObject | None = None,
    options: JsonObject | None = None,
) -> NewTurn:
    """Number and store a turn, in one round trip: started at once, with its user message
    and first model step, when `start_timeout_s` is given, else queued. Caller holds the
    session lock."""
    queued = TurnParams(
        session_id=session_id,
        tenant_id=tenant_id,
        turn_id=uuid.uuid4(),
        content=storable_text(content),
        idempotency_key=idempotency_key,
        request_hash=request_hash,
        traceparent=traceparent,
        user=user,
        route=route,
        options=options,
    )
    if start_timeout_s is None:
        counters = _INSERT_TURN[False].one(db, queued)
        return NewTurn(queued["turn_id"], session_id, counters.last_turn_seq, TurnStatus.QUEUED)
    started = StartedTurnParams(
        **queued,
        images=_images(options),
        timeout=timedelta(seconds=start_timeout_s),
        message_id=uuid.uuid4(),
        step_id=uuid.uuid4(),
    )
    counters = _INSERT_TURN[True].one(db, started)
    return NewTurn(
        id=started["turn_id"],
        session_id=session_id,
        seq=counters.last_turn_seq,
        status=TurnStatus.RUNNING,
        first_step_id=started["step_id"],
    )
