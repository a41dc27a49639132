"""Storing a tool step's result: one statement that takes the session's lock, finishes the
step (fenced by its attempt), stores the call's result, the `tool` message the model will
read and the audit row. Nothing is stored when a newer attempt owns the step.

It runs inside the caller's transaction, which then asks, with the session still locked,
whether the batch is complete (`batch_after`): a sibling that finished while this statement
waited for the lock is not in its snapshot, but is in the next statement's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, null, select, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session as Db

from .models import (
    decisions_table,
    messages_table,
    sessions_table,
    steps_table,
    tool_calls_table,
    turns_table,
)
from .repo import storable_json, storable_text
from .sql import Precompiled, const, exists_in

_ss, _s, _tc, _t = sessions_table.c, steps_table.c, tool_calls_table.c, turns_table.c


def _json(name: str) -> Any:
    return bindparam(name, type_=JSONB(none_as_null=True))


def _statement() -> Any:
    session_id: Any = bindparam("b_session_id")
    step_id: Any = bindparam("b_step_id")
    locked = select(_ss.id).where(_ss.id == session_id).with_for_update().cte("locked_session")
    finished = (
        update(steps_table)
        .where(
            _s.id == step_id,
            _s.attempt == bindparam("b_attempt"),
            _s.status == const("leased"),
            exists_in(locked),
        )
        .values(
            status=const("done"),
            finished_at=func.clock_timestamp(),
            lease_until=null(),
            error=null(),
            latency_ms=bindparam("b_latency_ms"),
        )
        .returning(_s.id)
        .cte("finished")
    )
    result = (
        update(tool_calls_table)
        .where(
            _tc.id == bindparam("b_tool_call_id"),
            _tc.status == const("pending"),
            exists_in(finished),
        )
        .values(
            status=const("done"),
            result=bindparam("b_content"),
            is_error=bindparam("b_is_error"),
            truncated=bindparam("b_truncated"),
            severity=bindparam("b_severity"),
            error_kind=bindparam("b_error_kind"),
            latency_ms=bindparam("b_latency_ms"),
            finished_at=func.clock_timestamp(),
        )
        .cte("result")
    )
    counted = (
        update(sessions_table)
        .where(_ss.id == session_id, exists_in(finished))
        .values(last_message_seq=_ss.last_message_seq + const(1))
        .returning(_ss.last_message_seq)
        .cte("counted")
    )
    message = {
        "id": bindparam("b_message_id"),
        "session_id": session_id,
        "seq": counted.c.last_message_seq,
        "role": const("tool"),
        "content": bindparam("b_content"),
        "tool_call_id": bindparam("b_call_id"),
        "name": bindparam("b_name"),
        "is_error": bindparam("b_is_error"),
        "turn_id": bindparam("b_turn_id"),
        "step_id": step_id,
    }
    stored = insert(messages_table).from_select(
        list(message),
        select(*(v if k == "seq" else v.label(k) for k, v in message.items())).select_from(counted),
        include_defaults=False,
    )
    audit = {
        "tenant_id": bindparam("b_tenant_id"),
        "session_id": session_id,
        "turn_id": bindparam("b_turn_id"),
        "step_id": step_id,
        "kind": const("tool"),
        "name": bindparam("b_name"),
        "attempt": bindparam("b_attempt"),
        "input": _json("b_input"),
        "output": _json("b_output"),
        "is_error": bindparam("b_is_error"),
        "latency_ms": bindparam("b_latency_ms"),
    }
    audited = insert(decisions_table).from_select(
        list(audit),
        select(*(v.label(k) for k, v in audit.items())).select_from(finished),
        include_defaults=False,
    )
    return select(finished.c.id).add_cte(
        result, stored.on_conflict_do_nothing().cte("message"), audited.cte("audit")
    )


_STORE_RESULT = Precompiled(_statement())


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's outcome, as `store_result` stores it."""

    session_id: uuid.UUID
    tenant_id: uuid.UUID
    turn_id: uuid.UUID
    step_id: uuid.UUID
    attempt: int
    tool_call_id: uuid.UUID
    call_id: str
    name: str
    content: str
    is_error: bool
    truncated: bool
    severity: str
    error_kind: str | None
    latency_ms: int
    audit_input: dict[str, Any]
    audit_output: dict[str, Any]


def store_result(db: Db, r: ToolResult) -> bool:
    """Store the result (see the module's doc); False when a newer attempt owns the step."""
    params = {
        "b_session_id": r.session_id,
        "b_tenant_id": r.tenant_id,
        "b_turn_id": r.turn_id,
        "b_step_id": r.step_id,
        "b_attempt": r.attempt,
        "b_tool_call_id": r.tool_call_id,
        "b_call_id": r.call_id,
        "b_name": r.name,
        "b_content": storable_text(r.content),
        "b_is_error": r.is_error,
        "b_truncated": r.truncated,
        "b_severity": r.severity,
        "b_error_kind": r.error_kind,
        "b_latency_ms": r.latency_ms,
        "b_message_id": uuid.uuid4(),
        "b_input": storable_json(r.audit_input),
        "b_output": storable_json(r.audit_output),
    }
    return _STORE_RESULT.first(db, params) is not None


_BATCH_AFTER = Precompiled(
    select(
        select(func.count())
        .where(
            _s.parent_step_id == bindparam("b_parent_step_id"),
            _s.kind == const("tool"),
            _s.status.in_([const("pending"), const("leased")]),
        )
        .scalar_subquery()
        .label("open"),
        select(_t.status)
        .where(_t.id == bindparam("b_turn_id"))
        .scalar_subquery()
        .label("turn_status"),
        select(func.coalesce(func.max(_s.step_no), const(0)))
        .where(_s.turn_id == bindparam("b_turn_id"))
        .scalar_subquery()
        .label("last_step_no"),
    )
)


@dataclass(frozen=True, slots=True)
class Batch:
    open: int
    """Tool steps of the batch not finished yet."""
    turn_status: str | None
    last_step_no: int


def batch_after(db: Db, *, parent_step_id: uuid.UUID, turn_id: uuid.UUID) -> Batch:
    """The batch of tool steps that `parent_step_id` asked for, and its turn, as they are now
    (one round trip; call it holding the session's lock)."""
    one = _BATCH_AFTER.one(db, {"b_parent_step_id": parent_step_id, "b_turn_id": turn_id})
    return Batch(one.open, one.turn_status, one.last_step_no)
