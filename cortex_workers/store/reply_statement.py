"""The statement that stores a model step's reply (`store.replies`): it checks the step is
still ours, then counts the reply in its session and turn, finishes the step, stores its
message and audit row and, when the reply ends the turn, cancels the turn's open steps and adds
a summarize step when the history outgrew its window.

The statement locks in the order every writer uses, session → turn → step: each `SELECT … FOR
UPDATE` joins the one before it, so Postgres must take the earlier lock before it can produce
the row to lock next. After a wait, a locked row is re-read at its newest version and checked
again (a turn cancelled meanwhile is not `running` any more), so either every write applies or
none does. That makes the statement safe on its own, without a transaction around it.

`gated` adds one more condition: no later turn of the session is waiting. Promoting that turn
takes more than one statement, so a gated statement that finds one applies nothing and says so;
the caller then stores the reply again, in a transaction that promotes the waiting turn too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import Boolean, bindparam, func, null, select, true, update
from sqlalchemy.dialects.postgresql import JSONB, array, insert

from ..vocabulary import OPEN_STEP_STATUSES, DecisionKind, StepKind, StepStatus, TurnStatus
from .models import decisions_table, messages_table, sessions_table, steps_table, turns_table
from .sql import Precompiled, const, exists_in, param

if TYPE_CHECKING:
    from .replies import ErrorDoc, ToolCallDoc

_ss, _tt, _s = sessions_table.c, turns_table.c, steps_table.c
_m, _d = messages_table.c, decisions_table.c


class _ReplyParams(TypedDict):
    session: uuid.UUID
    turn: uuid.UUID
    step: uuid.UUID
    attempt: int
    add_input: int
    add_output: int
    add_cost: float
    add_model_steps: int
    provider: str
    model: str
    fallback_from: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    latency_ms: int
    message_id: uuid.UUID
    content: str
    tool_calls: list[ToolCallDoc] | None


class ReplyParams(_ReplyParams, total=False):
    """The statement's parameters: the ids, the amounts added to the session and the turn,
    the step's `Usage` and the `Answer`; the audit row's and the end's when the variant has
    them (`_binds` fills them in)."""

    tenant_id: uuid.UUID
    call_name: str
    call_input: dict[str, Any]
    call_output: dict[str, Any]
    status: TurnStatus
    answer: str | None
    error: ErrorDoc | None
    summarize_step_id: uuid.UUID
    summarize: bool
    window: int


def _p(name: str, column: Any) -> Any:
    """A parameter for `column`, without a cast (`sql.param`) unless it is JSON, which must be
    typed to be serialized. Casts would make the statement too long: see `sql.const`."""
    return bindparam(name, type_=column.type) if isinstance(column.type, JSONB) else param(name)


def _labelled(row: dict[str, Any]) -> list[Any]:
    """The values of an `INSERT … SELECT`, each named for its column (not `anon_N`)."""
    return [v if k == "seq" else v.label(k) for k, v in row.items()]


# the ids, repeated most often
_SESSION, _TURN, _STEP = _p("session", _ss.id), _p("turn", _tt.id), _p("step", _s.id)


@dataclass(frozen=True, slots=True)
class _Locks:
    """The locking CTEs, session → turn → step, and `go`: the one that has a row when the
    statement may write."""

    session: Any
    turn: Any
    step: Any
    go: Any


def _locks(*, gated: bool) -> _Locks:
    session = (
        select(_ss.id, _ss.last_turn_seq).where(_ss.id == _SESSION).with_for_update().cte("ses")
    )
    turn = (
        select(_tt.id, _tt.seq)
        .where(_tt.id == _TURN, _tt.status == const(TurnStatus.RUNNING), exists_in(session))
        .with_for_update()
        .cte("trn")
    )
    step = (
        select(_s.id)
        .where(
            _s.id == _STEP,
            _s.attempt == param("attempt"),
            _s.status == const(StepStatus.LEASED),
            exists_in(turn),
        )
        .with_for_update()
        .cte("stp")
    )
    go = step
    if gated:  # no later turn waits to be promoted
        go = (
            select(step.c.id)
            .where(
                select(session.c.last_turn_seq).scalar_subquery()
                == select(turn.c.seq).scalar_subquery()
            )
            .cte("go")
        )
    return _Locks(session, turn, step, go)


def _counted(ours: Any) -> Any:
    """The reply counted in its session: one more message, its tokens and cost."""
    return (
        update(sessions_table)
        .where(_ss.id == _SESSION, ours)
        .values(
            last_message_seq=_ss.last_message_seq + const(1),
            input_tokens=_ss.input_tokens + param("add_input"),
            output_tokens=_ss.output_tokens + param("add_output"),
            cost_usd=_ss.cost_usd + param("add_cost"),
        )
        .returning(_ss.last_message_seq, _ss.summary_upto_seq, _ss.last_turn_seq)
        .cte("cnt")
    )


def _totals(ours: Any, *, ending: bool) -> Any:
    """The reply counted in its turn, which it ends when `ending`."""
    values: dict[str, Any] = {
        "input_tokens": _tt.input_tokens + param("add_input"),
        "output_tokens": _tt.output_tokens + param("add_output"),
        "cost_usd": _tt.cost_usd + param("add_cost"),
        "model_steps": _tt.model_steps + param("add_model_steps"),
    }
    if ending:
        values.update(
            status=_p("status", _tt.status),
            finished_at=func.clock_timestamp(),
            answer=_p("answer", _tt.answer),
            error=bindparam("error", type_=JSONB(none_as_null=True)),
        )
    return (
        update(turns_table)
        .where(_tt.id == _TURN, ours)
        .values(**values)
        .returning(
            _tt.id,
            _tt.seq,
            _tt.status,
            _tt.input_tokens,
            _tt.output_tokens,
            _tt.cost_usd,
            _tt.error.label("turn_error"),
        )
        .cte("tot")
    )


_USAGE = (
    "provider",
    "model",
    "fallback_from",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "latency_ms",
)


def _finished(ours: Any) -> Any:
    """The step, done, with its `Usage`."""
    return (
        update(steps_table)
        .where(_s.id == _STEP, ours)
        .values(
            status=const(StepStatus.DONE),
            finished_at=func.clock_timestamp(),
            lease_until=null(),
            error=null(),
            **{c: _p(c, _s[c]) for c in _USAGE},
        )
        .returning(_s.id)
        .cte("fin")
    )


_OWN = {"session_id": _SESSION, "turn_id": _TURN, "step_id": _STEP}
"""The ids a stored row takes from the statement."""


def _answer(finished: Any, counted: Any) -> Any:
    """The assistant message, numbered by the session's count."""
    message = {
        "id": _p("message_id", _m.id),
        "content": _p("content", _m.content),
        "tool_calls": _p("tool_calls", _m.tool_calls),
        **_OWN,
        "role": const("assistant"),
        "seq": counted.c.last_message_seq,
    }
    stored = insert(messages_table).from_select(
        list(message),
        select(*_labelled(message)).select_from(finished.join(counted, true())),
        include_defaults=False,
    )
    return stored.on_conflict_do_nothing().cte("msg")


def _audit(finished: Any) -> Any:
    """The audit row of the model call."""
    row = {
        "tenant_id": _p("tenant_id", _d.tenant_id),
        "name": _p("call_name", _d.name),
        "input": _p("call_input", _d.input),
        "output": _p("call_output", _d.output),
        **_OWN,
        "kind": const(DecisionKind.MODEL),
        "attempt": param("attempt"),
        "is_error": const(False),
        "latency_ms": _p("latency_ms", _s.latency_ms),
    }
    audit = insert(decisions_table).from_select(
        list(row), select(*_labelled(row)).select_from(finished), include_defaults=False
    )
    return audit.cte("aud")


def _cancelled(finished: Any) -> Any:
    """The turn's other open steps (not a summarize step), cancelled as it ends."""
    return (
        update(steps_table)
        .where(
            _s.turn_id == _TURN,
            _s.id != _STEP,
            _s.status.in_([const(s) for s in OPEN_STEP_STATUSES]),
            _s.kind != const(StepKind.SUMMARIZE),
            exists_in(finished),
        )
        .values(
            status=const(StepStatus.CANCELLED),
            finished_at=func.clock_timestamp(),
            lease_until=null(),
        )
        .returning(_s.step_no, _s.attempt, _s.kind)
        .cte("cxl")
    )


def _summarize(finished: Any, counted: Any) -> Any:
    """A summarize step after the turn's last, when asked for (`summarize`) and the session
    holds more than `window` messages beyond its summary."""
    last_step_no = (
        select(func.coalesce(func.max(_s.step_no), const(0)))
        .where(_s.turn_id == _TURN)
        .scalar_subquery()
    )
    step = select(
        _p("summarize_step_id", _s.id),
        _TURN,
        last_step_no + const(1),
        const(StepKind.SUMMARIZE),
        _STEP,
        const(StepStatus.PENDING),
        func.now(),
    )
    return (
        insert(steps_table)
        .from_select(
            ["id", "turn_id", "step_no", "kind", "parent_step_id", "status", "published_at"],
            step.select_from(finished.join(counted, true())).where(
                bindparam("summarize", type_=Boolean),
                counted.c.last_message_seq - counted.c.summary_upto_seq > param("window"),
            ),
            include_defaults=False,
        )
        .on_conflict_do_nothing()
        .returning(_s.id)
        .cte("summ")
    )


def _cut_off(cancelled: Any) -> Any:
    """`[step_no, attempt]` of the last claimed model step among the cancelled ones."""
    return (
        select(array([cancelled.c.step_no, cancelled.c.attempt]))
        .where(cancelled.c.kind == const(StepKind.MODEL), cancelled.c.attempt > const(0))
        .order_by(cancelled.c.step_no.desc(), cancelled.c.attempt.desc())
        .limit(const(1))
        .scalar_subquery()
    )


def _statement(*, ending: bool, audited: bool, gated: bool) -> Any:
    """One variant of the statement (see the module's doc): one row when the step is ours,
    whose other columns are NULL when nothing was stored."""
    locks = _locks(gated=gated)
    ours = exists_in(locks.go)
    counted, totals, finished = _counted(ours), _totals(ours, ending=ending), _finished(ours)
    writes = [_answer(finished, counted)]
    if audited:
        writes.append(_audit(finished))
    c = counted.c
    columns: list[Any] = [c.last_message_seq, c.summary_upto_seq, c.last_turn_seq, *totals.c]
    if ending:
        summarize = _summarize(finished, counted)
        columns += [
            _cut_off(_cancelled(finished)).label("cut_off"),
            select(summarize.c.id).scalar_subquery().label("summarize_step_id"),
        ]
    return (
        select(locks.step.c.id.label("owned"), *columns)
        .select_from(locks.step.outerjoin(counted, true()).outerjoin(totals, true()))
        .add_cte(*writes)
    )


STATEMENTS = {
    (ending, audited, gated): Precompiled(
        _statement(ending=ending, audited=audited, gated=gated), params=ReplyParams
    )
    for ending in (False, True)
    for audited in (False, True)
    for gated in ((False, True) if ending else (False,))
}
