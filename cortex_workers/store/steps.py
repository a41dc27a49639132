"""Steps: creation, finishing, retries, and the reconciler's queries. Claims, the hot path's
reads, are in `store.claims` (re-exported here for callers that import them from this
module)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import and_, bindparam, func, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import ErrorDoc, JsonObject
from ..vocabulary import OPEN_STEP_STATUSES, DecisionKind, StepKind, StepStatus, TurnStatus
from .claims import (
    Claim,
    claim_model_step,
    claim_step,
    claim_tool_step,
    model_step_view,
)
from .models import Step, Turn, decisions_table, steps_table
from .repo import now
from .sql import Params
from .step_views import ModelStepView, ToolStepView
from .workers import interval, takeable

__all__ = [
    "Claim",
    "ModelStepView",
    "ToolStepView",
    "claim_model_step",
    "claim_step",
    "claim_tool_step",
    "model_step_view",
]


def insert_step(
    db: Db,
    *,
    turn_id: uuid.UUID,
    step_no: int,
    kind: StepKind,
    parent_step_id: uuid.UUID | None = None,
    call_index: int | None = None,
    tool_call_id: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """Create a pending step; None if (turn, step_no) exists already (a redelivered writer)."""
    row = {
        "id": uuid.uuid4(),
        "turn_id": turn_id,
        "step_no": step_no,
        "kind": kind,
        "parent_step_id": parent_step_id,
        "call_index": call_index,
        "tool_call_id": tool_call_id,
    }
    step_id: uuid.UUID | None = db.execute(_INSERT_STEP, row).scalar_one_or_none()
    return step_id


def last_step_no(db: Db, turn_id: uuid.UUID) -> int:
    return db.execute(
        select(func.coalesce(func.max(Step.step_no), 0)).where(Step.turn_id == turn_id)
    ).scalar_one()


# Statements every step runs, built once (see `store.claims`); their parameters are bound by
# name (`b_…`: SQLAlchemy keeps a column's own name for the value of its SET), the values of
# a SET or an INSERT come in as column keys.
_s = steps_table.c

_FINISH = (
    update(steps_table)
    .where(
        _s.id == bindparam("b_step_id"),
        _s.attempt == bindparam("b_attempt"),
        _s.status == StepStatus.LEASED,
    )
    .returning(_s.id)
)

_CANCEL_OPEN = (
    update(steps_table)
    .where(
        _s.turn_id == bindparam("b_turn_id"),
        _s.status.in_(OPEN_STEP_STATUSES),
        _s.kind != StepKind.SUMMARIZE,
    )
    .returning(_s.step_no, _s.attempt, _s.kind)
)

_INSERT_DECISION = insert(decisions_table)

_INSERT_STEP = (
    insert(steps_table)
    .values(status=StepStatus.PENDING, published_at=func.now())
    .on_conflict_do_nothing()
    .returning(_s.id)
)


def renew_leases(
    db: Db, held: list[tuple[uuid.UUID, int]], *, lease_s: float
) -> set[tuple[uuid.UUID, int]]:
    """Extend many leases in one statement; returns the (step, attempt) pairs still ours. A
    lease is never shortened: a tool step parked on its call's task holds a longer one."""
    live_turn = select(Turn.id).where(Turn.id == Step.turn_id, Turn.status == TurnStatus.RUNNING)
    rows = db.execute(
        update(Step)
        .where(
            tuple_(Step.id, Step.attempt).in_(held),
            Step.status == StepStatus.LEASED,
            or_(Step.kind == StepKind.SUMMARIZE, live_turn.exists()),
        )
        .values(
            lease_until=func.greatest(Step.lease_until, func.now() + timedelta(seconds=lease_s)),
            renewed_at=func.now(),
        )
        .returning(Step.id, Step.attempt)
    ).all()
    return {(r.id, r.attempt) for r in rows}


def finish_step(
    db: Db,
    step_id: uuid.UUID,
    attempt: int,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> bool:
    """Mark our attempt done, with its usage when given; False means a newer attempt owns the
    step (we are a zombie)."""
    values: Params = {
        "status": StepStatus.DONE,
        "finished_at": now(),
        "lease_until": None,
        "error": None,
    }
    if input_tokens is not None:
        values["input_tokens"] = input_tokens
    if output_tokens is not None:
        values["output_tokens"] = output_tokens
    params = {"b_step_id": step_id, "b_attempt": attempt, **values}
    return db.execute(_FINISH, params).first() is not None


def fail_step(db: Db, step_id: uuid.UUID, *, error: ErrorDoc) -> None:
    db.execute(
        update(Step)
        .where(Step.id == step_id, Step.status.in_(OPEN_STEP_STATUSES))
        .values(status=StepStatus.FAILED, error=error, finished_at=now(), lease_until=None)
    )


def cancel_open_steps(db: Db, turn_id: uuid.UUID) -> tuple[int, int] | None:
    """Cancel the turn's unfinished steps; returns (step_no, attempt) of the last model step
    among them that had been claimed (cut off mid-stream), if any."""
    values = {"status": StepStatus.CANCELLED, "finished_at": now(), "lease_until": None}
    rows = db.execute(_CANCEL_OPEN, {"b_turn_id": turn_id, **values}).all()
    claimed = [(r.step_no, r.attempt) for r in rows if r.kind == StepKind.MODEL and r.attempt > 0]
    return max(claimed) if claimed else None


def cut_off_model_step(db: Db, turn_id: uuid.UUID) -> tuple[int, int] | None:
    """(step_no, attempt) of the turn's model step that was claimed but never finished."""
    row = db.execute(
        select(Step.step_no, Step.attempt)
        .where(
            Step.turn_id == turn_id,
            Step.kind == StepKind.MODEL,
            Step.attempt > 0,
            Step.status.in_((StepStatus.FAILED, StepStatus.CANCELLED)),
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


def stale_steps(
    db: Db, *, republish_after_s: float, liveness_s: float, limit: int = 200
) -> Sequence[Step]:
    """Steps whose delivery was lost: pending and unclaimed too long, or leased with an
    expired lease or by a worker that is gone (`store.workers.takeable`).

    Rows are locked with SKIP LOCKED so two reconcilers never take the same step.
    """
    cutoff = func.now() - timedelta(seconds=republish_after_s)
    return (
        db.execute(
            select(Step)
            .where(
                or_(
                    and_(
                        Step.status == StepStatus.PENDING,
                        Step.available_at < cutoff,
                        or_(Step.published_at.is_(None), Step.published_at < cutoff),
                    ),
                    takeable(interval(liveness_s)),
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
    step.status = StepStatus.PENDING
    step.lease_until = None
    step.holder = None
    step.published_at = now()
    db.flush()


def record_decision(
    db: Db,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    turn_id: uuid.UUID | None,
    step_id: uuid.UUID | None,
    kind: DecisionKind,
    name: str,
    attempt: int,
    is_error: bool = False,
    latency_ms: int | None = None,
    input: JsonObject | None = None,
    output: JsonObject | None = None,
) -> None:
    """Append one audit row (`input` and `output` are JSON documents: what was asked, what
    came back)."""
    row: Params = {
        "tenant_id": tenant_id,
        "session_id": session_id,
        "turn_id": turn_id,
        "step_id": step_id,
        "kind": kind,
        "name": name,
        "attempt": attempt,
        "is_error": is_error,
        "latency_ms": latency_ms,
    }
    # an absent document is SQL NULL; a bound None would be stored as JSON null
    row.update({k: v for k, v in (("input", input), ("output", output)) if v is not None})
    db.execute(_INSERT_DECISION, row)
