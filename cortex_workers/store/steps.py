"""Steps: creation, lease claims fenced by attempt, retries, and the reconciler's queries."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    Integer,
    Interval,
    and_,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by, insert
from sqlalchemy.orm import Session as Db

from .db import Executor
from .models import (
    Step,
    Turn,
    decisions_table,
    messages_table,
    sessions_table,
    steps_table,
    tool_calls_table,
    turns_table,
)
from .repo import now
from .sql import Precompiled, const


@dataclass(frozen=True, slots=True)
class Claim:
    """A step this worker now holds: `attempt` fences every later write."""

    step_id: uuid.UUID
    turn_id: uuid.UUID
    step_no: int
    kind: str
    attempt: int
    parent_step_id: uuid.UUID | None
    call_index: int | None
    tool_call_id: uuid.UUID | None


def insert_step(
    db: Db, *, turn_id: uuid.UUID, step_no: int, kind: str, **fields: Any
) -> uuid.UUID | None:
    """Create a pending step; None if (turn, step_no) exists already (a redelivered writer)."""
    row = {"id": uuid.uuid4(), "turn_id": turn_id, "step_no": step_no, "kind": kind, **fields}
    step_id: uuid.UUID | None = db.execute(_INSERT_STEP, row).scalar_one_or_none()
    return step_id


def last_step_no(db: Db, turn_id: uuid.UUID) -> int:
    return db.execute(
        select(func.coalesce(func.max(Step.step_no), 0)).where(Step.turn_id == turn_id)
    ).scalar_one()


# The statements every step runs are built once: a statement object that is reused is not
# rebuilt on each call and keeps its cache key, which SQLAlchemy otherwise computes per call.
# Their parameters are bound by name (`b_…`); the values of a SET come in as column keys.
_s, _t = steps_table.c, turns_table.c

# a step's columns a `Claim` holds
_CLAIMED = (
    _s.id,
    _s.turn_id,
    _s.step_no,
    _s.kind,
    _s.attempt,
    _s.parent_step_id,
    _s.call_index,
    _s.tool_call_id,
)

# The step's turn is joined by its key (`UPDATE … FROM turns`): a correlated `EXISTS` under
# the `OR` may be planned as a hash of every running turn, a cost that grows with the load.
_CLAIM = (
    update(steps_table)
    .where(
        _s.id == bindparam("b_step_id"),
        _t.id == _s.turn_id,
        or_(
            _s.status == const("pending"),
            and_(_s.status == const("leased"), _s.lease_until < func.now()),
        ),
        _s.available_at <= func.now() + literal_column("interval '1 second'"),
        or_(_s.kind == const("summarize"), _t.status == const("running")),
    )
    .values(
        status=const("leased"),
        attempt=_s.attempt + const(1),
        lease_until=func.now() + bindparam("b_lease", type_=Interval()),
    )
    .returning(*_CLAIMED)
)


_HISTORY_COLUMNS = ("role", "content", "tool_calls", "tool_call_id", "name", "is_error")


def _with_view(step: Any) -> Any:
    """`step`'s columns, and what a model step reads about its turn and session: the turn's
    `model_steps`, the session's columns, the seq of the turn's user message (`user_seq`),
    the step_no of the step's parent (`parent_step_no`) and, as `history`, the messages the
    model sees (a JSON array, oldest first, of `_HISTORY_COLUMNS`): the last `b_window`
    messages after the summary, and always the whole turn."""
    c, ss, m = step.c, sessions_table.c, messages_table.c
    parent = steps_table.alias("parent")
    seen = messages_table.alias("seen")
    # correlated by hand: auto-correlation reaches only the enclosing SELECT, so inside
    # `history` the step would be a FROM of its own, and the subquery a scan of every turn's
    # user message
    user_seq = (
        select(m.seq)
        .where(m.turn_id == c.turn_id, m.role == const("user"))
        .correlate_except(messages_table)
        .scalar_subquery()
    )
    start = func.least(
        func.coalesce(user_seq, ss.last_message_seq),
        func.greatest(
            ss.summary_upto_seq + const(1),
            ss.last_message_seq - bindparam("b_window", type_=Integer) + const(1),
        ),
    )
    row = func.json_build_object(*(x for k in _HISTORY_COLUMNS for x in (const(k), seen.c[k])))
    history = (
        select(func.json_agg(aggregate_order_by(row, seen.c.seq)))
        .where(seen.c.session_id == ss.id, seen.c.seq >= start)
        .scalar_subquery()
    )
    return select(
        *c,
        _t.model_steps,
        ss.id.label("session_id"),
        ss.tenant_id,
        ss.system_prompt,
        ss.provider,
        ss.model,
        ss.tools,
        ss["metadata"].label("session_metadata"),
        ss.summary,
        ss.summary_upto_seq,
        ss.last_message_seq,
        user_seq.label("user_seq"),
        select(parent.c.step_no)
        .where(parent.c.id == c.parent_step_id)
        .scalar_subquery()
        .label("parent_step_no"),
        history.label("history"),
    ).select_from(
        step.join(turns_table, _t.id == c.turn_id).join(sessions_table, ss.id == _t.session_id)
    )


# the claim (an UPDATE … RETURNING as a CTE) and the view, in one round trip
_CLAIM_WITH_VIEW = Precompiled(_with_view(_CLAIM.cte("claimed")))
_STEP_VIEW = Precompiled(
    _with_view(select(*_CLAIMED).where(_s.id == bindparam("b_step_id")).subquery("step"))
)


def _with_call() -> Any:
    """The tool-step claim, with its call and what the step reads about its session: the
    call's `call_id`, `name` and `arguments`, the session's `id`, `name`, `tenant_id` and
    `tools` (as `allowed`), and the step_no of the model step that asked for the call."""
    claimed = _CLAIM.cte("claimed")
    c, tc, ss = claimed.c, tool_calls_table.c, sessions_table.c
    parent = steps_table.alias("parent")
    return select(
        *c,
        tc.call_id,
        tc.name,
        tc.arguments,
        ss.id.label("session_id"),
        ss.name.label("session_name"),
        ss.tenant_id,
        ss.tools.label("allowed"),
        parent.c.step_no.label("parent_no"),
    ).select_from(
        claimed.join(tool_calls_table, tc.id == c.tool_call_id)
        .join(parent, parent.c.id == c.parent_step_id)
        .join(turns_table, _t.id == c.turn_id)
        .join(sessions_table, ss.id == _t.session_id)
    )


_CLAIM_WITH_CALL = Precompiled(_with_call())
_CLAIM_ALONE = Precompiled(_CLAIM)

_FINISH = (
    update(steps_table)
    .where(
        _s.id == bindparam("b_step_id"),
        _s.attempt == bindparam("b_attempt"),
        _s.status == "leased",
    )
    .returning(_s.id)
)

_CANCEL_OPEN = (
    update(steps_table)
    .where(
        _s.turn_id == bindparam("b_turn_id"),
        _s.status.in_(("pending", "leased")),
        _s.kind != "summarize",
    )
    .returning(_s.step_no, _s.attempt, _s.kind)
)

_INSERT_DECISION = insert(decisions_table)

_INSERT_STEP = (
    insert(steps_table)
    .values(status="pending", published_at=func.now())
    .on_conflict_do_nothing()
    .returning(_s.id)
)


def claim_step(db: Db, step_id: uuid.UUID, *, lease_s: float) -> Claim | None:
    """Lease a pending (or lease-expired) step of a live turn; None means someone else has it."""
    row = _CLAIM_ALONE.first(db, {"b_step_id": step_id, "b_lease": timedelta(seconds=lease_s)})
    return None if row is None else _claim_of(row)


def claim_model_step(
    db: Executor, step_id: uuid.UUID, *, lease_s: float, window: int
) -> tuple[Claim, Any] | None:
    """`claim_step`, with what a model step reads about its turn and session and the last
    `window` messages of its history, in one round trip (see `_with_view`); None means
    someone else has it."""
    params = {"b_step_id": step_id, "b_lease": timedelta(seconds=lease_s), "b_window": window}
    row = _CLAIM_WITH_VIEW.first(db, params)
    return None if row is None else (_claim_of(row), row)


def claim_tool_step(
    db: Executor, step_id: uuid.UUID, *, lease_s: float
) -> tuple[Claim, Any] | None:
    """`claim_step` for a tool step, with its call and session, in one round trip (see
    `_with_call`); None means someone else has it."""
    params = {"b_step_id": step_id, "b_lease": timedelta(seconds=lease_s)}
    row = _CLAIM_WITH_CALL.first(db, params)
    return None if row is None else (_claim_of(row), row)


def model_step_view(db: Executor, step_id: uuid.UUID, *, window: int) -> Any:
    """What `claim_model_step` reads with a claim, for a step as it is (to inspect the
    context a step saw, without claiming it)."""
    return _STEP_VIEW.one(db, {"b_step_id": step_id, "b_window": window})


def _claim_of(row: Any) -> Claim:
    return Claim(
        step_id=row.id,
        turn_id=row.turn_id,
        step_no=row.step_no,
        kind=row.kind,
        attempt=row.attempt,
        parent_step_id=row.parent_step_id,
        call_index=row.call_index,
        tool_call_id=row.tool_call_id,
    )


def renew_leases(
    db: Db, held: list[tuple[uuid.UUID, int]], *, lease_s: float
) -> set[tuple[uuid.UUID, int]]:
    """Extend many leases in one statement; returns the (step, attempt) pairs still ours."""
    live_turn = select(Turn.id).where(Turn.id == Step.turn_id, Turn.status == "running")
    rows = db.execute(
        update(Step)
        .where(
            tuple_(Step.id, Step.attempt).in_(held),
            Step.status == "leased",
            or_(Step.kind == "summarize", live_turn.exists()),
        )
        .values(lease_until=func.now() + timedelta(seconds=lease_s))
        .returning(Step.id, Step.attempt)
    ).all()
    return {(r.id, r.attempt) for r in rows}


def finish_step(db: Db, step_id: uuid.UUID, attempt: int, **fields: Any) -> bool:
    """Mark our attempt done; False means a newer attempt owns the step (we are a zombie)."""
    values = {"status": "done", "finished_at": now(), "lease_until": None, "error": None}
    params = {"b_step_id": step_id, "b_attempt": attempt, **values, **fields}
    return db.execute(_FINISH, params).first() is not None


def release_for_retry(
    db: Db, step_id: uuid.UUID, attempt: int, *, delay_s: float, error: dict[str, Any]
) -> bool:
    """Give the step back as pending, available after `delay_s`."""
    return (
        db.execute(
            update(Step)
            .where(Step.id == step_id, Step.attempt == attempt, Step.status == "leased")
            .values(
                status="pending",
                lease_until=None,
                error=error,
                available_at=func.now() + timedelta(seconds=delay_s),
                published_at=func.now(),
            )
            .returning(Step.id)
        ).first()
        is not None
    )


def defer_step(db: Db, step_id: uuid.UUID, attempt: int, *, delay_s: float) -> bool:
    """Give the step back without counting this attempt (it waited on a rate limit)."""
    return (
        db.execute(
            update(Step)
            .where(Step.id == step_id, Step.attempt == attempt, Step.status == "leased")
            .values(
                status="pending",
                attempt=attempt - 1,
                lease_until=None,
                available_at=func.now() + timedelta(seconds=delay_s),
                published_at=func.now(),
            )
            .returning(Step.id)
        ).first()
        is not None
    )


def fail_step(db: Db, step_id: uuid.UUID, *, error: dict[str, Any]) -> None:
    db.execute(
        update(Step)
        .where(Step.id == step_id, Step.status.in_(("pending", "leased")))
        .values(status="failed", error=error, finished_at=now(), lease_until=None)
    )


def cancel_open_steps(db: Db, turn_id: uuid.UUID) -> tuple[int, int] | None:
    """Cancel the turn's unfinished steps; returns (step_no, attempt) of the last model step
    among them that had been claimed (cut off mid-stream), if any."""
    values = {"status": "cancelled", "finished_at": now(), "lease_until": None}
    rows = db.execute(_CANCEL_OPEN, {"b_turn_id": turn_id, **values}).all()
    claimed = [(r.step_no, r.attempt) for r in rows if r.kind == "model" and r.attempt > 0]
    return max(claimed) if claimed else None


def cut_off_model_step(db: Db, turn_id: uuid.UUID) -> tuple[int, int] | None:
    """(step_no, attempt) of the turn's model step that was claimed but never finished."""
    row = db.execute(
        select(Step.step_no, Step.attempt)
        .where(
            Step.turn_id == turn_id,
            Step.kind == "model",
            Step.attempt > 0,
            Step.status.in_(("failed", "cancelled")),
        )
        .order_by(Step.step_no.desc())
        .limit(1)
    ).first()
    return (row.step_no, row.attempt) if row else None


def get_step(db: Db, step_id: uuid.UUID, *, lock: bool = False) -> Step | None:
    query = select(Step).where(Step.id == step_id)
    if lock:
        query = query.with_for_update()
    return db.execute(query).scalar_one_or_none()


def steps_of_turn(db: Db, turn_id: uuid.UUID) -> Sequence[Step]:
    return (
        db.execute(select(Step).where(Step.turn_id == turn_id).order_by(Step.step_no))
        .scalars()
        .all()
    )


def stale_steps(db: Db, *, republish_after_s: float, limit: int = 200) -> Sequence[Step]:
    """Steps whose delivery was lost: pending and unclaimed too long, or with an expired lease.

    Rows are locked with SKIP LOCKED so two reconcilers never take the same step.
    """
    cutoff = func.now() - timedelta(seconds=republish_after_s)
    return (
        db.execute(
            select(Step)
            .where(
                or_(
                    and_(
                        Step.status == "pending",
                        Step.available_at < cutoff,
                        or_(Step.published_at.is_(None), Step.published_at < cutoff),
                    ),
                    and_(Step.status == "leased", Step.lease_until < func.now()),
                )
            )
            .order_by(Step.created_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        .scalars()
        .all()
    )


def mark_republished(db: Db, step: Step) -> None:
    """Back to pending (fencing out the old lease holder) and stamped as published now."""
    step.status = "pending"
    step.lease_until = None
    step.published_at = now()
    db.flush()


def record_decision(db: Db, **fields: Any) -> None:
    """Append one audit row."""
    db.execute(_INSERT_DECISION, fields)
