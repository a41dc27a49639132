"""Sessions, turns and messages: every query the product makes on them.

Functions take an open SQLAlchemy session inside a transaction; the caller owns the commit.
Steps, leases and the reconciler's queries are in `store.steps`, tool calls in
`store.tool_calls`, tenants and their keys in `store.tenants`, proposals in `store.proposals`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Interval,
    Row,
    bindparam,
    exists,
    func,
    literal,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from .models import (
    Message,
    Session,
    Turn,
    messages_table,
    sessions_table,
    steps_table,
    turns_table,
)

# Statements of the hot path, built once (see `store.steps`): parameters bound by name
# (`b_…`, `d_…` for amounts added), the values of a SET or an INSERT as column keys.
_m, _ss, _tt, _st = messages_table.c, sessions_table.c, turns_table.c, steps_table.c

_INSERT_MESSAGE = insert(messages_table).on_conflict_do_nothing().returning(_m.seq)

ACTIVE = ("queued", "running")

_LOCK_SESSION = (
    select(_ss.id)
    .where(_ss.id == bindparam("b_session_id"), _ss.tenant_id == bindparam("b_tenant_id"))
    .with_for_update()
)

_ACTIVE_TURNS = (
    select(_tt.id, _tt.seq, _tt.status)
    .where(_tt.session_id == bindparam("b_session_id"), _tt.status.in_(ACTIVE))
    .order_by(_tt.seq)
)


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
    values: dict[str, Any] = {"last_turn_seq": _ss.last_turn_seq + 1}
    if starts:
        values.update(last_message_seq=_ss.last_message_seq + 1, model_calls=_ss.model_calls + 1)
    session_id: Any = bindparam("b_session_id")
    where = [_ss.id == session_id]
    if if_idle:
        locked = (
            select(_ss.id, _ss.last_turn_seq)
            .where(_ss.id == session_id, _ss.tenant_id == bindparam("b_tenant_id"))
            .with_for_update()
            .cte("locked")
        )
        active = (
            select(_tt.id)
            .where(
                _tt.session_id == session_id,
                _tt.status.in_([literal_column("'queued'"), literal_column("'running'")]),
                exists().select_from(locked),
            )
            .with_for_update()
            .cte("active")
        )
        as_seen = select(_ss.last_turn_seq).where(_ss.id == session_id).scalar_subquery()
        where += [
            select(locked.c.last_turn_seq).scalar_subquery() == as_seen,
            ~exists().select_from(active),
        ]
    numbered = (
        update(sessions_table)
        .where(*where)
        .values(**values)
        .returning(_ss.id, _ss.last_turn_seq, _ss.last_message_seq, _ss.model_calls)
        .cte("numbered")
    )
    n = numbered.c
    turn_id = bindparam("b_turn_id", type_=_tt.id.type)
    content = bindparam("b_content", type_=_tt.content.type)
    turn: dict[str, Any] = {
        "id": turn_id,
        "tenant_id": bindparam("b_tenant_id", type_=_tt.tenant_id.type),
        "session_id": n.id,
        "seq": n.last_turn_seq,
        "status": literal("running" if starts else "queued", _tt.status.type),
        "content": content,
        "idempotency_key": bindparam("b_idempotency_key", type_=_tt.idempotency_key.type),
        "request_hash": bindparam("b_request_hash", type_=_tt.request_hash.type),
    }
    rows = {turns_table: turn}
    if starts:
        # the time it starts, after the session lock (`now()` is when the transaction began)
        turn["started_at"] = func.clock_timestamp()
        turn["deadline"] = func.clock_timestamp() + bindparam("b_timeout", type_=Interval())
        rows[messages_table] = {
            "id": bindparam("b_message_id", type_=_m.id.type),
            "session_id": n.id,
            "seq": n.last_message_seq,
            "role": literal("user", _m.role.type),
            "content": content,
            "turn_id": turn_id,
        }
        rows[steps_table] = {
            "id": bindparam("b_step_id", type_=_st.id.type),
            "turn_id": turn_id,
            "step_no": literal(1, _st.step_no.type),
            "kind": literal("model", _st.kind.type),
            "status": literal("pending", _st.status.type),
            "published_at": func.now(),
            "call_index": n.model_calls - 1,
        }
    inserts = [
        insert(table).from_select(  # the columns not named here take their server defaults
            list(row), select(*row.values()).select_from(numbered), include_defaults=False
        )
        for table, row in rows.items()
    ]
    counters = select(n.last_turn_seq, n.last_message_seq, n.model_calls)
    if if_idle:
        counters = select(locked.c.id.label("found"), *counters.selected_columns).select_from(
            locked.outerjoin(numbered, true())
        )
    return counters.add_cte(
        *(stmt.cte(f"new_{table.name}") for stmt, table in zip(inserts, rows, strict=True))
    )


_INSERT_TURN = {False: _insert_turn(False), True: _insert_turn(True)}
_START_TURN_IF_IDLE = _insert_turn(True, if_idle=True)
TERMINAL = ("done", "failed", "cancelled")


def now() -> datetime:
    return datetime.now(UTC)


def storable_text(value: str) -> str:
    """Postgres text cannot hold NUL: model and tool output may contain it, so replace it."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def storable_json(value: Any) -> Any:
    """The same for JSONB, through nested values."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable_json(v) for v in value]
    return value


# -- sessions and messages ----------------------------------------------------------------------


def insert_session(db: Db, tenant_id: uuid.UUID, **fields: Any) -> Session:
    row = Session(tenant_id=tenant_id, **fields)
    db.add(row)
    db.flush()
    return row


def get_session(
    db: Db, session_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None, lock: bool = False
) -> Session | None:
    """The session, scoped to `tenant_id` when given; `lock` takes its row lock."""
    query = select(Session).where(Session.id == session_id)
    if tenant_id is not None:
        query = query.where(Session.tenant_id == tenant_id)
    if lock:
        query = query.with_for_update()
    return db.execute(query).scalar_one_or_none()


def allocate_message_seq(db: Db, session_id: uuid.UUID) -> int:
    """The next message sequence number of the session (takes the session's row lock)."""
    return db.execute(
        update(Session)
        .where(Session.id == session_id)
        .values(last_message_seq=Session.last_message_seq + 1)
        .returning(Session.last_message_seq)
    ).scalar_one()


def insert_message(
    db: Db,
    *,
    session_id: uuid.UUID,
    role: str,
    content: str,
    seq: int | None = None,
    **fields: Any,
) -> int | None:
    """Store a message (under `seq` when the caller already allocated it); returns its seq,
    or None when it was already stored (redelivery)."""
    if seq is None:
        seq = allocate_message_seq(db, session_id)
    row = {
        "id": uuid.uuid4(),
        "session_id": session_id,
        "seq": seq,
        "role": role,
        "content": storable_text(content),
        **{k: storable_json(v) if k == "tool_calls" else v for k, v in fields.items()},
    }
    stored: int | None = db.execute(_INSERT_MESSAGE, row).scalar_one_or_none()
    return stored


def list_messages(db: Db, session_id: uuid.UUID, *, after: int, limit: int) -> Sequence[Message]:
    return (
        db.execute(
            select(Message)
            .where(Message.session_id == session_id, Message.seq > after)
            .order_by(Message.seq)
            .limit(limit)
        )
        .scalars()
        .all()
    )


def messages_between(db: Db, session_id: uuid.UUID, *, after: int, upto: int) -> Sequence[Message]:
    return (
        db.execute(
            select(Message)
            .where(Message.session_id == session_id, Message.seq > after, Message.seq <= upto)
            .order_by(Message.seq)
        )
        .scalars()
        .all()
    )


def turn_messages(db: Db, turn_id: uuid.UUID) -> Sequence[Message]:
    return (
        db.execute(select(Message).where(Message.turn_id == turn_id).order_by(Message.seq))
        .scalars()
        .all()
    )


def next_model_call_index(db: Db, session_id: uuid.UUID) -> int:
    """Number the session's model steps from 0 (the scripted provider's reply index)."""
    return (
        db.execute(
            update(Session)
            .where(Session.id == session_id)
            .values(model_calls=Session.model_calls + 1)
            .returning(Session.model_calls)
        ).scalar_one()
        - 1
    )


def fold_summary(
    db: Db, session_id: uuid.UUID, *, expected_upto: int, upto: int, summary: str
) -> bool:
    """Replace the rolling summary if nobody folded it meanwhile."""
    return (
        db.execute(
            update(Session)
            .where(Session.id == session_id, Session.summary_upto_seq == expected_upto)
            .values(summary=summary, summary_upto_seq=upto)
            .returning(Session.id)
        ).first()
        is not None
    )


# -- turns --------------------------------------------------------------------------------------


def get_turn(
    db: Db, turn_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None, lock: bool = False
) -> Turn | None:
    query = select(Turn).where(Turn.id == turn_id)
    if tenant_id is not None:
        query = query.where(Turn.tenant_id == tenant_id)
    if lock:
        query = query.with_for_update()
    return db.execute(query).scalar_one_or_none()


def turn_by_idempotency_key(db: Db, tenant_id: uuid.UUID, key: str) -> Turn | None:
    return db.execute(
        select(Turn).where(Turn.tenant_id == tenant_id, Turn.idempotency_key == key)
    ).scalar_one_or_none()


def active_turns(db: Db, session_id: uuid.UUID) -> Sequence[Row[uuid.UUID, int, str]]:
    """`id`, `seq` and `status` of the session's running and queued turns, oldest first."""
    return db.execute(_ACTIVE_TURNS, {"b_session_id": session_id}).all()


def lock_session(db: Db, session_id: uuid.UUID, tenant_id: uuid.UUID) -> bool:
    """Take the tenant's session's row lock; False when there is no such session."""
    params = {"b_session_id": session_id, "b_tenant_id": tenant_id}
    return db.execute(_LOCK_SESSION, params).first() is not None


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A turn just stored: what the 202 response says of it, and its first model step when
    it started at once."""

    id: uuid.UUID
    session_id: uuid.UUID
    seq: int
    status: str
    first_step_id: uuid.UUID | None = None


def start_turn_if_idle(
    db: Db,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    timeout_s: float,
    content: str,
    request_hash: str | None = None,
) -> NewTurn | bool:
    """Store a turn that starts at once, with its user message and first model step, if the
    tenant's session has no active turn: one statement that commits on its own (see
    `_insert_turn`). False when there is no such session, True when it stored nothing (the
    session is busy, or changed while the statement waited for its lock)."""
    params: dict[str, Any] = {
        "b_session_id": session_id,
        "b_turn_id": uuid.uuid4(),
        "b_tenant_id": tenant_id,
        "b_content": storable_text(content),
        "b_idempotency_key": None,
        "b_request_hash": request_hash,
        "b_timeout": timedelta(seconds=timeout_s),
        "b_message_id": uuid.uuid4(),
        "b_step_id": uuid.uuid4(),
    }
    row = db.execute(_START_TURN_IF_IDLE, params).first()
    if row is None:
        return False
    if row.last_turn_seq is None:
        return True
    return NewTurn(
        id=params["b_turn_id"],
        session_id=session_id,
        seq=row.last_turn_seq,
        status="running",
        first_step_id=params["b_step_id"],
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
) -> NewTurn:
    """Number and store a turn, in one round trip: started at once, with its user message
    and first model step, when `start_timeout_s` is given, else queued. Caller holds the
    session lock."""
    starts = start_timeout_s is not None
    params: dict[str, Any] = {
        "b_session_id": session_id,
        "b_turn_id": uuid.uuid4(),
        "b_tenant_id": tenant_id,
        "b_content": storable_text(content),
        "b_idempotency_key": idempotency_key,
        "b_request_hash": request_hash,
    }
    if starts:
        params.update(
            b_timeout=timedelta(seconds=start_timeout_s or 0),
            b_message_id=uuid.uuid4(),
            b_step_id=uuid.uuid4(),
        )
    counters = db.execute(_INSERT_TURN[starts], params).one()
    return NewTurn(
        id=params["b_turn_id"],
        session_id=session_id,
        seq=counters.last_turn_seq,
        status="running" if starts else "queued",
        first_step_id=params.get("b_step_id"),
    )


def start_turn(db: Db, turn: Turn, *, timeout_s: float) -> None:
    turn.status = "running"
    turn.started_at = now()
    turn.deadline = turn.started_at + timedelta(seconds=timeout_s)
    db.flush()


def end_turn(
    db: Db,
    turn_id: uuid.UUID,
    *,
    status: str,
    from_statuses: Sequence[str] = ACTIVE,
    answer: str | None = None,
    error: dict[str, Any] | None = None,
) -> Turn | None:
    """Move a turn to a terminal status if it is still in `from_statuses`; None otherwise."""
    values: dict[str, Any] = {"status": status, "finished_at": now()}
    if answer is not None:
        values["answer"] = storable_text(answer)
    if error is not None:
        values["error"] = error
    return db.execute(
        update(Turn)
        .where(Turn.id == turn_id, Turn.status.in_(from_statuses))
        .values(**values)
        .returning(Turn)
    ).scalar_one_or_none()


def add_turn_warnings(db: Db, turn_id: uuid.UUID, warnings: list[dict[str, Any]]) -> None:
    """Append warnings (e.g. tools offered through the prompt), each recorded once."""
    turn = db.get(Turn, turn_id)
    if turn is None or not warnings:
        return
    current = list(turn.warnings or [])
    turn.warnings = current + [w for w in warnings if w not in current]


def sessions_needing_promotion(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    """Sessions with a queued turn and none running (a lost promotion)."""
    running = select(Turn.session_id).where(Turn.status == "running")
    return (
        db.execute(
            select(Turn.session_id)
            .where(Turn.status == "queued", Turn.session_id.not_in(running))
            .distinct()
            .limit(limit)
        )
        .scalars()
        .all()
    )


def overdue_turns(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    return (
        db.execute(
            select(Turn.id).where(Turn.status == "running", Turn.deadline < func.now()).limit(limit)
        )
        .scalars()
        .all()
    )


def turn_owner_and_status(db: Db, turn_id: uuid.UUID) -> tuple[uuid.UUID, str] | None:
    """(tenant_id, status) of the turn, in one small query (the SSE endpoint's check)."""
    row = db.execute(select(Turn.tenant_id, Turn.status).where(Turn.id == turn_id)).first()
    return (row.tenant_id, row.status) if row else None
