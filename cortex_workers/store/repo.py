"""Sessions, turns and messages: reads and the simpler writes.

Functions take an open SQLAlchemy session inside a transaction; the caller owns the commit.
The hot path's one-statement writes have their own modules: a new turn in `store.new_turns`,
a model step's reply in `store.replies`, a tool's result in `store.tool_results`, a step's
claim in `store.claims`. Steps, leases and the reconciler's queries are in `store.steps`, tool
calls in `store.tool_calls`, tenants and their keys in `store.tenants`, proposals in
`store.proposals`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Row,
    bindparam,
    func,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import LlmMode, TurnStatus
from .models import (
    Message,
    Session,
    Turn,
    messages_table,
    sessions_table,
    steps_table,
    turns_table,
)
from .replies import ToolCallDoc
from .sql import Params

# Statements of the hot path, built once (see `store.claims`): parameters bound by name
# (`b_…`, `d_…` for amounts added), the values of a SET or an INSERT as column keys.
_m, _ss, _tt, _st = messages_table.c, sessions_table.c, turns_table.c, steps_table.c

_INSERT_MESSAGE = insert(messages_table).on_conflict_do_nothing().returning(_m.seq)

ACTIVE = (TurnStatus.QUEUED, TurnStatus.RUNNING)

_ACTIVE_TURNS = (
    select(_tt.id, _tt.seq, _tt.status)
    .where(_tt.session_id == bindparam("b_session_id"), _tt.status.in_(ACTIVE))
    .order_by(_tt.seq)
)


# A session's last activity: the newest turn's latest time (posted, started or ended; through
# the (session_id, seq) index), else the session's creation. A column of the listing's and the
# session's own SELECT, never a query of its own.
_NEWEST_TURN_AT = (
    select(func.greatest(_tt.created_at, _tt.started_at, _tt.finished_at))
    .where(_tt.session_id == _ss.id)
    .order_by(_tt.seq.desc())
    .limit(1)
    .correlate(sessions_table)
    .scalar_subquery()
)
LAST_ACTIVITY_AT = func.coalesce(_NEWEST_TURN_AT, _ss.created_at).label("last_activity_at")


TERMINAL = (TurnStatus.DONE, TurnStatus.FAILED, TurnStatus.CANCELLED)


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


def insert_session(
    db: Db,
    tenant_id: uuid.UUID,
    *,
    name: str | None = None,
    system_prompt: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    tools: list[str] | None = None,
    metadata_: JsonObject | None = None,
    user: str | None = None,
    mode: LlmMode | None = None,
    route: JsonObject | None = None,
) -> Session:
    row = Session(
        user=user,
        mode=mode,
        route=route,
        tenant_id=tenant_id,
        name=name,
        system_prompt=system_prompt,
        provider=provider,
        model=model,
        tools=tools,
        metadata_={} if metadata_ is None else metadata_,
    )
    db.add(row)
    db.flush()
    return row


def recent_sessions(
    db: Db, tenant_id: uuid.UUID, *, limit: int, before: uuid.UUID | None = None
) -> Sequence[tuple[Session, datetime]]:
    """The tenant's sessions with their last activity (`LAST_ACTIVITY_AT`), newest first,
    older than session `before` when given."""
    query = select(Session, LAST_ACTIVITY_AT).where(Session.tenant_id == tenant_id)
    if before is not None:
        mark = select(Session.created_at, Session.id).where(
            Session.id == before, Session.tenant_id == tenant_id
        )
        row = db.execute(mark).first()
        if row is not None:
            query = query.where(tuple_(Session.created_at, Session.id) < tuple_(*row))
    query = query.order_by(Session.created_at.desc(), Session.id.desc()).limit(limit)
    return db.execute(query).tuples().all()


def session_with_activity(
    db: Db, session_id: uuid.UUID, *, tenant_id: uuid.UUID
) -> tuple[Session, datetime] | None:
    """The tenant's session and its last activity (`LAST_ACTIVITY_AT`), in one SELECT."""
    query = select(Session, LAST_ACTIVITY_AT).where(
        Session.id == session_id, Session.tenant_id == tenant_id
    )
    return db.execute(query).tuples().one_or_none()


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
    turn_id: uuid.UUID | None = None,
    step_id: uuid.UUID | None = None,
    tool_calls: list[ToolCallDoc] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
    is_error: bool = False,
    images: list[str] | None = None,
) -> int | None:
    """Store a message (under `seq` when the caller already allocated it); returns its seq,
    or None when it was already stored (redelivery)."""
    if seq is None:
        seq = allocate_message_seq(db, session_id)
    row: Params = {
        "id": uuid.uuid4(),
        "session_id": session_id,
        "seq": seq,
        "role": role,
        "content": storable_text(content),
        "is_error": is_error,
    }
    optional = {
        "turn_id": turn_id,
        "step_id": step_id,
        "tool_calls": None if tool_calls is None else storable_json(tool_calls),
        "tool_call_id": tool_call_id,
        "name": name,
        "images": storable_json(images) if images else None,
    }
    # an absent value is SQL NULL (a bound None would be JSON null in `tool_calls`)
    row.update({k: v for k, v in optional.items() if v is not None})
    stored: int | None = db.execute(_INSERT_MESSAGE, row).scalar_one_or_none()
    return stored


def list_messages(
    db: Db, session_id: uuid.UUID, *, after: int, limit: int, include_rolled_back: bool = False
) -> Sequence[Message]:
    query = select(Message).where(Message.session_id == session_id, Message.seq > after)
    if not include_rolled_back:
        query = query.where(~Message.rolled_back)
    return db.execute(query.order_by(Message.seq).limit(limit)).scalars().all()


def messages_between(db: Db, session_id: uuid.UUID, *, after: int, upto: int) -> Sequence[Message]:
    return (
        db.execute(
            select(Message)
            .where(
                Message.session_id == session_id,
                Message.seq > after,
                Message.seq <= upto,
                ~Message.rolled_back,
            )
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
    """Replace the rolling summary if nobody folded it meanwhile, and no message it folded was
    rolled back meanwhile."""
    rolled_back = (
        select(Message.id)
        .where(
            Message.session_id == session_id,
            Message.seq > expected_upto,
            Message.seq <= upto,
            Message.rolled_back,
        )
        .exists()
    )
    return (
        db.execute(
            update(Session)
            .where(
                Session.id == session_id, Session.summary_upto_seq == expected_upto, ~rolled_back
            )
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


def active_turns(db: Db, session_id: uuid.UUID) -> Sequence[Row[uuid.UUID, int, TurnStatus]]:
    """`id`, `seq` and `status` of the session's running and queued turns, oldest first."""
    return db.execute(_ACTIVE_TURNS, {"b_session_id": session_id}).all()


def start_turn(db: Db, turn: Turn, *, timeout_s: float) -> None:
    turn.status = TurnStatus.RUNNING
    turn.started_at = now()
    turn.deadline = turn.started_at + timedelta(seconds=timeout_s)
    db.flush()


def end_turn(
    db: Db,
    turn_id: uuid.UUID,
    *,
    status: TurnStatus,
    from_statuses: Sequence[TurnStatus] = ACTIVE,
    answer: str | None = None,
    error: ErrorDoc | None = None,
) -> Turn | None:
    """Move a turn to a terminal status if it is still in `from_statuses`; None otherwise."""
    values: Params = {"status": status, "finished_at": now()}
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


def sessions_needing_promotion(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    """Sessions with a queued turn and none running (a lost promotion)."""
    running = select(Turn.session_id).where(Turn.status == TurnStatus.RUNNING)
    return (
        db.execute(
            select(Turn.session_id)
            .where(Turn.status == TurnStatus.QUEUED, Turn.session_id.not_in(running))
            .distinct()
            .limit(limit)
        )
        .scalars()
        .all()
    )


def overdue_turns(db: Db, *, limit: int = 100) -> Sequence[uuid.UUID]:
    return (
        db.execute(
            select(Turn.id)
            .where(Turn.status == TurnStatus.RUNNING, Turn.deadline < func.now())
            .limit(limit)
        )
        .scalars()
        .all()
    )


def turn_owner_status_and_trace(
    db: Db, turn_id: uuid.UUID
) -> tuple[uuid.UUID, TurnStatus, str | None, uuid.UUID] | None:
    """(tenant_id, status, traceparent, session_id) of the turn, in one small query (the SSE
    endpoint's check, and the trace its request links to)."""
    query = select(Turn.tenant_id, Turn.status, Turn.traceparent, Turn.session_id).where(
        Turn.id == turn_id
    )
    row = db.execute(query).first()
    return (row.tenant_id, row.status, row.traceparent, row.session_id) if row else None


def turn_at(db: Db, session_id: uuid.UUID, seq: int) -> Turn | None:
    """The session's turn numbered `seq`, if it exists yet (the session event stream's walk)."""
    return db.execute(
        select(Turn).where(Turn.session_id == session_id, Turn.seq == seq)
    ).scalar_one_or_none()
