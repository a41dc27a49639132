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
from typing import Any, TypedDict

from sqlalchemy import bindparam, func, null, select, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Session as Db

from ..vocabulary import (
    OPEN_STEP_STATUSES,
    DecisionKind,
    StepKind,
    StepStatus,
    ToolCallStatus,
    ToolSeverity,
    TurnStatus,
)
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


class ResultParams(TypedDict):
    """The parameters of `_STORE_RESULT`: `ToolResult`'s fields, and the new message's id."""

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
    severity: ToolSeverity
    error_kind: str | None
    latency_ms: int
    message_id: uuid.UUID
    audit_input: dict[str, Any]
    audit_output: dict[str, Any]


def _json(name: str) -> Any:
    return bindparam(name, type_=JSONB(none_as_null=True))


_SESSION_ID: Any = bindparam("session_id")
_STEP_ID: Any = bindparam("step_id")


def _finished(locked: Any) -> Any:
    """The step, done: fenced by its attempt, after the session's lock."""
    return (
        update(steps_table)
        .where(
            _s.id == _STEP_ID,
            _s.attempt == bindparam("attempt"),
            _s.status == const(StepStatus.LEASED),
            exists_in(locked),
        )
        .values(
            status=const(StepStatus.DONE),
            finished_at=func.clock_timestamp(),
            lease_until=null(),
            error=null(),
            latency_ms=bindparam("latency_ms"),
        )
        .returning(_s.id)
        .cte("finished")
    )


def _result(finished: Any) -> Any:
    """The call's result, stored once."""
    return (
        update(tool_calls_table)
        .where(
            _tc.id == bindparam("tool_call_id"),
            _tc.status == const(ToolCallStatus.PENDING),
            exists_in(finished),
        )
        .values(
            status=const(ToolCallStatus.DONE),
            result=bindparam("content"),
            is_error=bindparam("is_error"),
            truncated=bindparam("truncated"),
            severity=bindparam("severity"),
            error_kind=bindparam("error_kind"),
            latency_ms=bindparam("latency_ms"),
            finished_at=func.clock_timestamp(),
        )
        .cte("result")
    )


def _message(finished: Any) -> Any:
    """The `tool` message the model will read, numbered in its session."""
    counted = (
        update(sessions_table)
        .where(_ss.id == _SESSION_ID, exists_in(finished))
        .values(last_message_seq=_ss.last_message_seq + const(1))
        .returning(_ss.last_message_seq)
        .cte("counted")
    )
    message = {
        "id": bindparam("message_id"),
        "session_id": _SESSION_ID,
        "seq": counted.c.last_message_seq,
        "role": const("tool"),
        "content": bindparam("content"),
        "tool_call_id": bindparam("call_id"),
        "name": bindparam("name"),
        "is_error": bindparam("is_error"),
        "turn_id": bindparam("turn_id"),
        "step_id": _STEP_ID,
    }
    stored = insert(messages_table).from_select(
        list(message),
        select(*(v if k == "seq" else v.label(k) for k, v in message.items())).select_from(counted),
        include_defaults=False,
    )
    return stored.on_conflict_do_nothing().cte("message")


def _audit(finished: Any) -> Any:
    """The audit row of the call."""
    audit = {
        "tenant_id": bindparam("tenant_id"),
        "session_id": _SESSION_ID,
        "turn_id": bindparam("turn_id"),
        "step_id": _STEP_ID,
        "kind": const(DecisionKind.TOOL),
        "name": bindparam("name"),
        "attempt": bindparam("attempt"),
        "input": _json("audit_input"),
        "output": _json("audit_output"),
        "is_error": bindparam("is_error"),
        "latency_ms": bindparam("latency_ms"),
    }
    audited = insert(decisions_table).from_select(
        list(audit),
        select(*(v.label(k) for k, v in audit.items())).select_from(finished),
        include_defaults=False,
    )
    return audited.cte("audit")


def _statement() -> Any:
    locked = select(_ss.id).where(_ss.id == _SESSION_ID).with_for_update().cte("locked_session")
    finished = _finished(locked)
    return select(finished.c.id).add_cte(_result(finished), _message(finished), _audit(finished))


_STORE_RESULT = Precompiled(_statement(), params=ResultParams)


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
    severity: ToolSeverity
    error_kind: str | None
    latency_ms: int
    audit_input: dict[str, Any]
    audit_output: dict[str, Any]


def store_result(db: Db, r: ToolResult) -> bool:
    """Store the result (see the module's doc); False when a newer attempt owns the step."""
    params = ResultParams(
        session_id=r.session_id,
        tenant_id=r.tenant_id,
        turn_id=r.turn_id,
        step_id=r.step_id,
        attempt=r.attempt,
        tool_call_id=r.tool_call_id,
        call_id=r.call_id,
        name=r.name,
        content=storable_text(r.content),
        is_error=r.is_error,
        truncated=r.truncated,
        severity=r.severity,
        error_kind=r.error_kind,
        latency_ms=r.latency_ms,
        message_id=uuid.uuid4(),
        audit_input=storable_json(r.audit_input),
        audit_output=storable_json(r.audit_output),
    )
    return _STORE_RESULT.first(db, params) is not None


class BatchParams(TypedDict):
    parent_step_id: uuid.UUID
    turn_id: uuid.UUID


_BATCH_AFTER = Precompiled(
    select(
        select(func.count())
        .where(
            _s.parent_step_id == bindparam("parent_step_id"),
            _s.kind == const(StepKind.TOOL),
            _s.status.in_([const(s) for s in OPEN_STEP_STATUSES]),
        )
        .scalar_subquery()
        .label("open"),
        select(_t.status)
        .where(_t.id == bindparam("turn_id"))
        .scalar_subquery()
        .label("turn_status"),
        select(func.coalesce(func.max(_s.step_no), const(0)))
        .where(_s.turn_id == bindparam("turn_id"))
        .scalar_subquery()
        .label("last_step_no"),
    ),
    params=BatchParams,
)


@dataclass(frozen=True, slots=True)
class Batch:
    open: int
    """Tool steps of the batch not finished yet."""
    turn_status: TurnStatus | None
    last_step_no: int


def batch_after(db: Db, *, parent_step_id: uuid.UUID, turn_id: uuid.UUID) -> Batch:
    """The batch of tool steps that `parent_step_id` asked for, and its turn, as they are now
    (one round trip; call it holding the session's lock)."""
    one = _BATCH_AFTER.one(db, BatchParams(parent_step_id=parent_step_id, turn_id=turn_id))
    status = None if one.turn_status is None else TurnStatus(one.turn_status)
    return Batch(one.open, status, one.last_step_no)
