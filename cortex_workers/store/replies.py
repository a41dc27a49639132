"""Storing a model step's reply: one statement that checks the step is still ours, then counts
the reply in its session and turn, finishes the step, stores its message and audit row and,
when the reply ends the turn, cancels the turn's open steps and adds a summarize step when the
history outgrew its window.

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
from typing import Any

from sqlalchemy import (
    Boolean,
    bindparam,
    func,
    null,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, array, insert

from .db import Executor
from .models import (
    decisions_table,
    messages_table,
    sessions_table,
    steps_table,
    turns_table,
)
from .sql import Precompiled, const, exists_in, param

_ss, _tt, _s = sessions_table.c, turns_table.c, steps_table.c

USAGE = (  # the model step's usage, set as it finishes
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
ANSWER = ("id", "content", "tool_calls")
"""The assistant message's columns that the caller gives (the rest are the step's own)."""
AUDIT = ("tenant_id", "name", "input", "output")
"""The same for the audit row of the model call."""


@dataclass(frozen=True, slots=True)
class SessionCounters:
    last_message_seq: int
    summary_upto_seq: int
    last_turn_seq: int


@dataclass(frozen=True, slots=True)
class TurnTotals:
    """The turn after the reply was counted in it (and, maybe, it ended)."""

    id: uuid.UUID
    seq: int
    status: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Stored:
    """What the statement did. Not `owned`: the turn is no longer running or a newer attempt
    owns the step, and nothing was stored. `owned` but no `turn`: a gated statement found a
    later turn waiting and stored nothing."""

    owned: bool
    session: SessionCounters | None = None
    turn: TurnTotals | None = None
    cut_off: tuple[int, int] | None = None
    """(step_no, attempt) of a claimed model step the turn's end cancelled."""
    summarize_step_id: uuid.UUID | None = None


def _p(name: str, column: Any) -> Any:
    """A parameter for `column`, without a cast (`sql.param`) unless it is JSON, which must be
    typed to be serialized. Casts would make the statement too long: see `sql.const`."""
    return bindparam(name, type_=column.type) if isinstance(column.type, JSONB) else param(name)


def _labelled(row: dict[str, Any]) -> list[Any]:
    """The values of an `INSERT … SELECT`, each named for its column (not `anon_N`)."""
    return [v if k == "seq" else v.label(k) for k, v in row.items()]


def _statement(*, ending: bool, audited: bool, gated: bool) -> Any:
    # The ids are repeated most often, so their parameters have the shortest names; the
    # attempt keeps its prefix, as SQLAlchemy reserves a column's own name for its SET value.
    turn_id, step_id = _p("turn", _tt.id), _p("step", _s.id)
    session_id = _p("session", _ss.id)
    session = (
        select(_ss.id, _ss.last_turn_seq).where(_ss.id == session_id).with_for_update().cte("ses")
    )
    turn = (
        select(_tt.id, _tt.seq)
        .where(_tt.id == turn_id, _tt.status == const("running"), exists_in(session))
        .with_for_update()
        .cte("trn")
    )
    step = (
        select(_s.id)
        .where(
            _s.id == step_id,
            _s.attempt == param("b_attempt"),
            _s.status == const("leased"),
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
    ours = exists_in(go)
    counted = (
        update(sessions_table)
        .where(_ss.id == session_id, ours)
        .values(
            last_message_seq=_ss.last_message_seq + const(1),
            input_tokens=_ss.input_tokens + param("d_input"),
            output_tokens=_ss.output_tokens + param("d_output"),
            cost_usd=_ss.cost_usd + param("d_cost"),
        )
        .returning(_ss.last_message_seq, _ss.summary_upto_seq, _ss.last_turn_seq)
        .cte("cnt")
    )
    turn_values: dict[str, Any] = {
        "input_tokens": _tt.input_tokens + param("d_input"),
        "output_tokens": _tt.output_tokens + param("d_output"),
        "cost_usd": _tt.cost_usd + param("d_cost"),
        "model_steps": _tt.model_steps + param("d_model_steps"),
    }
    if ending:
        turn_values.update(
            status=_p("t_status", _tt.status),
            finished_at=func.clock_timestamp(),
            answer=_p("t_answer", _tt.answer),
            error=bindparam("t_error", type_=JSONB(none_as_null=True)),
        )
    totals = (
        update(turns_table)
        .where(_tt.id == turn_id, ours)
        .values(**turn_values)
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
    finished = (
        update(steps_table)
        .where(_s.id == step_id, ours)
        .values(
            status=const("done"),
            finished_at=func.clock_timestamp(),
            lease_until=null(),
            error=null(),
            **{c: _p(f"s_{c}", _s[c]) for c in USAGE},
        )
        .returning(_s.id)
        .cte("fin")
    )
    m = messages_table.c
    own = {"session_id": session_id, "turn_id": turn_id, "step_id": step_id}
    message = {
        **{c: _p(f"m_{c}", m[c]) for c in ANSWER},
        **own,
        "role": const("assistant"),
        "seq": counted.c.last_message_seq,
    }
    answer = insert(messages_table).from_select(
        list(message),
        select(*_labelled(message)).select_from(finished.join(counted, true())),
        include_defaults=False,
    )
    writes = [answer.on_conflict_do_nothing().cte("msg")]
    if audited:
        d = decisions_table.c
        row = {
            **{c: _p(f"a_{c}", d[c]) for c in AUDIT},
            **own,
            "kind": const("model"),
            "attempt": param("b_attempt"),
            "is_error": const(False),
            "latency_ms": _p("s_latency_ms", _s.latency_ms),
        }
        audit = insert(decisions_table).from_select(
            list(row), select(*_labelled(row)).select_from(finished), include_defaults=False
        )
        writes.append(audit.cte("aud"))
    columns: list[Any] = [
        counted.c.last_message_seq,
        counted.c.summary_upto_seq,
        counted.c.last_turn_seq,
        *totals.c,
    ]
    if ending:
        cancelled = (
            update(steps_table)
            .where(
                _s.turn_id == turn_id,
                _s.id != step_id,
                _s.status.in_([const("pending"), const("leased")]),
                _s.kind != const("summarize"),
                exists_in(finished),
            )
            .values(
                status=const("cancelled"), finished_at=func.clock_timestamp(), lease_until=null()
            )
            .returning(_s.step_no, _s.attempt, _s.kind)
            .cte("cxl")
        )
        last_step_no = (
            select(func.coalesce(func.max(_s.step_no), const(0)))
            .where(_s.turn_id == turn_id)
            .scalar_subquery()
        )
        summarize = (
            insert(steps_table)
            .from_select(
                ["id", "turn_id", "step_no", "kind", "parent_step_id", "status", "published_at"],
                select(
                    _p("b_summarize_step_id", _s.id),
                    turn_id,
                    last_step_no + const(1),
                    const("summarize"),
                    step_id,
                    const("pending"),
                    func.now(),
                )
                .select_from(finished.join(counted, true()))
                .where(
                    bindparam("b_summarize", type_=Boolean),
                    counted.c.last_message_seq - counted.c.summary_upto_seq > param("b_window"),
                ),
                include_defaults=False,
            )
            .on_conflict_do_nothing()
            .returning(_s.id)
            .cte("summ")
        )
        cut_off = (
            select(array([cancelled.c.step_no, cancelled.c.attempt]))
            .where(cancelled.c.kind == const("model"), cancelled.c.attempt > const(0))
            .order_by(cancelled.c.step_no.desc(), cancelled.c.attempt.desc())
            .limit(const(1))
            .scalar_subquery()
        )
        columns += [
            cut_off.label("cut_off"),
            select(summarize.c.id).scalar_subquery().label("summarize_step_id"),
        ]
    # one row when the step is ours; its other columns are NULL when nothing was stored
    return (
        select(step.c.id.label("owned"), *columns)
        .select_from(step.outerjoin(counted, true()).outerjoin(totals, true()))
        .add_cte(*writes)
    )


_STATEMENTS = {
    (ending, audited, gated): Precompiled(_statement(ending=ending, audited=audited, gated=gated))
    for ending in (False, True)
    for audited in (False, True)
    for gated in ((False, True) if ending else (False,))
}


@dataclass(frozen=True, slots=True)
class Reply:
    """A model step's reply, as the statement stores it."""

    session_id: uuid.UUID
    turn_id: uuid.UUID
    step_id: uuid.UUID
    attempt: int
    input_tokens: int
    output_tokens: int
    cost: float
    model_steps: int
    usage: dict[str, Any]
    """The columns of `USAGE`."""
    message: dict[str, Any]
    """The columns of `ANSWER`."""
    audit: dict[str, Any] | None
    """The columns of `AUDIT`; None stores no audit row."""
    end: str | None = None
    """The turn's terminal status when this reply ends it."""
    answer: str | None = None
    error: dict[str, Any] | None = None
    summarize_window: int | None = None
    """With `end`: add a summarize step when the session holds more messages than this
    beyond its summary."""


def store_reply(db: Executor, reply: Reply, *, gated: bool = False) -> Stored:
    """Store `reply` in one statement (see the module's doc)."""
    ending = reply.end is not None
    params: dict[str, Any] = {
        "session": reply.session_id,
        "turn": reply.turn_id,
        "step": reply.step_id,
        "b_attempt": reply.attempt,
        "d_input": reply.input_tokens,
        "d_output": reply.output_tokens,
        "d_cost": reply.cost,
        "d_model_steps": reply.model_steps,
        **{f"s_{c}": reply.usage.get(c) for c in USAGE},
        **{f"m_{c}": reply.message.get(c) for c in ANSWER},
    }
    if reply.audit is not None:
        params.update({f"a_{c}": reply.audit.get(c) for c in AUDIT})
    if ending:
        params.update(
            t_status=reply.end,
            t_answer=reply.answer,
            t_error=reply.error,
            b_summarize_step_id=uuid.uuid4(),
            b_summarize=reply.summarize_window is not None,
            b_window=reply.summarize_window or 0,
        )
    statement = _STATEMENTS[(ending, reply.audit is not None, gated and ending)]
    row = statement.first(db, params)
    if row is None:
        return Stored(owned=False)
    if row.id is None:
        return Stored(owned=True)
    return Stored(
        owned=True,
        session=SessionCounters(row.last_message_seq, row.summary_upto_seq, row.last_turn_seq),
        turn=TurnTotals(
            row.id,
            row.seq,
            row.status,
            row.input_tokens,
            row.output_tokens,
            float(row.cost_usd),
            row.turn_error,
        ),
        cut_off=tuple(row.cut_off) if ending and row.cut_off else None,
        summarize_step_id=row.summarize_step_id if ending else None,
    )
