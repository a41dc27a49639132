"""Claiming a step: a lease fenced by attempt, taken in one statement, with what the step reads
to run (a model step's context, a tool step's call) in the same round trip.

The statements are built once: a statement object that is reused is not rebuilt on each call
and keeps its cache key, which SQLAlchemy otherwise computes per call. See
`docs/architecture.md` (the claim) and `docs/benchmarks.md` (why one round trip).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from sqlalchemy import (
    Integer,
    Interval,
    String,
    bindparam,
    func,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by

from ..vocabulary import (
    StepKind,
    StepStatus,
    TurnStatus,
)
from .claim_reads import guard_columns, plan_columns
from .db import Executor
from .models import (
    Tenant,
    messages_table,
    sessions_table,
    steps_table,
    tool_calls_table,
    turns_table,
)
from .sql import Precompiled, const
from .step_views import ModelStepView, ToolStepView
from .workers import takeable

_s, _t = steps_table.c, turns_table.c


@dataclass(frozen=True, slots=True)
class Claim:
    """A step this worker now holds: `attempt` fences every later write."""

    step_id: uuid.UUID
    turn_id: uuid.UUID
    step_no: int
    kind: StepKind
    attempt: int
    parent_step_id: uuid.UUID | None
    call_index: int | None
    tool_call_id: uuid.UUID | None
    traceparent: str | None = None
    """The turn's stored W3C traceparent: the step's span is its child, so a turn is one trace."""
    queue_wait_s: float = 0.0
    """Seconds from the step's delivery being due (available, or re-published) to this claim,
    in the database's clock."""
    turn_age_s: float = 0.0
    """Seconds from the turn's creation to this claim, in the database's clock."""
    claimed_at: float = 0.0
    """`time.monotonic()` when the claim was read."""

    def turn_age(self) -> float:
        """Seconds since the turn was created, now."""
        return self.turn_age_s + time.monotonic() - self.claimed_at

    @classmethod
    def of(cls, row: Any) -> Claim:
        """From a row with the claim's columns (`_CLAIMED` and `_CLAIM_EXTRAS`)."""
        return cls(
            step_id=row.id,
            turn_id=row.turn_id,
            step_no=row.step_no,
            kind=StepKind(row.kind),
            attempt=row.attempt,
            parent_step_id=row.parent_step_id,
            call_index=row.call_index,
            tool_call_id=row.tool_call_id,
            traceparent=row.traceparent,
            queue_wait_s=float(row.queue_wait_s or 0.0),
            turn_age_s=float(row.turn_age_s or 0.0),
            claimed_at=time.monotonic(),
        )


class ClaimParams(TypedDict):
    """The parameters of a claim (`_claim`)."""

    step_id: uuid.UUID
    lease: timedelta
    liveness: timedelta
    """A leased step whose holder has not beaten for this long may be taken."""
    worker: str
    """This process's holder id (`workers.holder`)."""


class PlanParams(TypedDict):
    """What decides which of a model step's optional reads the claim makes."""

    window: int
    """How many messages of history, at most, before the turn's own."""
    tool_limits: bool
    """The configuration limits calls per tool: count the turn's calls of each tool (a
    session's own `tool_call_limits` asks for them too)."""
    recoveries: bool
    """A recovery action `retry` is configured: the steps of the turn it retried."""


class ClaimWithViewParams(ClaimParams, PlanParams):
    pass


class ViewParams(PlanParams):
    step_id: uuid.UUID


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
# what the claim returns besides: the turn's traceparent, the time the step waited since it
# was due (`greatest` skips a NULL `published_at`) and the turn's age
_WAITED = func.now() - func.greatest(_s.available_at, _s.published_at)
_CLAIM_EXTRAS = (
    _t.traceparent,
    func.extract("epoch", _WAITED).label("queue_wait_s"),
    func.extract("epoch", func.now() - _t.created_at).label("turn_age_s"),
)


def _claim() -> Any:
    """`UPDATE steps … RETURNING`: lease a pending step of a running turn, or a leased one
    whose lease expired or whose holder is gone (`store.workers.takeable`), naming this
    process as its holder.

    The step's turn is joined by its key (`UPDATE … FROM turns`): a correlated `EXISTS` under
    the `OR` may be planned as a hash of every running turn, a cost that grows with the load."""
    return (
        update(steps_table)
        .where(
            _s.id == bindparam("step_id"),
            _t.id == _s.turn_id,
            or_(
                _s.status == const(StepStatus.PENDING),
                takeable(bindparam("liveness", type_=Interval())),
            ),
            _s.available_at <= func.now() + literal_column("interval '1 second'"),
            or_(_s.kind == const(StepKind.SUMMARIZE), _t.status == const(TurnStatus.RUNNING)),
        )
        .values(
            status=const(StepStatus.LEASED),
            attempt=_s.attempt + const(1),
            lease_until=func.now() + bindparam("lease", type_=Interval()),
            holder=bindparam("worker", type_=String()),
            renewed_at=func.now(),
        )
        .returning(*_CLAIMED, *_CLAIM_EXTRAS)
    )


_HISTORY_COLUMNS = (
    "role", "content", "tool_calls", "tool_call_id", "name", "is_error", "images"
)  # fmt: skip


def _history(step: Any) -> Any:
    """The messages a model step sees, as a JSON array oldest first: the last `window`
    messages after the summary, and always the whole turn; and the seq of the turn's user
    message."""
    c, ss, m = step.c, sessions_table.c, messages_table.c
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
    # the window counts the messages that stand: a rollback leaves gaps in the seqs
    standing = messages_table.alias("standing")
    window_start = (
        select(standing.c.seq)
        .where(standing.c.session_id == ss.id, ~standing.c.rolled_back)
        .order_by(standing.c.seq.desc())
        .offset(bindparam("window", type_=Integer) - const(1))
        .limit(1)
        .correlate_except(standing)
        .scalar_subquery()
    )
    start = func.least(
        func.coalesce(user_seq, ss.last_message_seq),
        func.greatest(ss.summary_upto_seq + const(1), func.coalesce(window_start, const(0))),
    )
    row = func.json_build_object(*(x for k in _HISTORY_COLUMNS for x in (const(k), seen.c[k])))
    history = (
        select(func.json_agg(aggregate_order_by(row, seen.c.seq)))
        .where(seen.c.session_id == ss.id, seen.c.seq >= start, ~seen.c.rolled_back)
        .scalar_subquery()
    )
    return history, user_seq


def _with_view(step: Any) -> Any:
    """`step`'s columns, and what a model step reads about its turn and session: the columns
    of `ModelStepView`."""
    c, ss = step.c, sessions_table.c
    parent = steps_table.alias("parent")
    history, user_seq = _history(step)
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
        ss.mode.label("session_mode"),
        Tenant.__table__.c.mode.label("tenant_mode"),
        ss.route.label("session_route"),
        _t.route.label("turn_route"),
        # the options without the images: the turn's user message holds them
        _t.options.op("-", return_type=JSONB)(const("images")).label("turn_options"),
        *plan_columns(step),
    ).select_from(
        step.join(turns_table, _t.id == c.turn_id)
        .join(sessions_table, ss.id == _t.session_id)
        .join(Tenant.__table__, Tenant.__table__.c.id == ss.tenant_id)
    )


def _with_call() -> Any:
    """The tool-step claim, with the columns of `ToolStepView`."""
    claimed = _claim().cte("claimed")
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
        Tenant.__table__.c.name.label("tenant_name"),
        ss.tools.label("allowed"),
        parent.c.step_no.label("parent_no"),
        *guard_columns(claimed),
    ).select_from(
        claimed.join(tool_calls_table, tc.id == c.tool_call_id)
        .join(parent, parent.c.id == c.parent_step_id)
        .join(turns_table, _t.id == c.turn_id)
        .join(sessions_table, ss.id == _t.session_id)
        .join(Tenant.__table__, Tenant.__table__.c.id == ss.tenant_id)
    )


_CLAIM_ALONE = Precompiled(_claim(), params=ClaimParams)
# the claim (an UPDATE … RETURNING as a CTE) and the view, in one round trip
_CLAIM_WITH_VIEW = Precompiled(_with_view(_claim().cte("claimed")), params=ClaimWithViewParams)
_STEP_VIEW = Precompiled(
    _with_view(select(*_CLAIMED).where(_s.id == bindparam("step_id")).subquery("step")),
    params=ViewParams,
)
_CLAIM_WITH_CALL = Precompiled(_with_call(), params=ClaimParams)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who claims, and how long a holder's silence means it is gone."""

    worker: str
    liveness_s: float


def _params(step_id: uuid.UUID, lease_s: float, holder: Holder) -> ClaimParams:
    return ClaimParams(
        step_id=step_id,
        lease=timedelta(seconds=lease_s),
        liveness=timedelta(seconds=holder.liveness_s),
        worker=holder.worker,
    )


def claim_step(db: Executor, step_id: uuid.UUID, *, lease_s: float, holder: Holder) -> Claim | None:
    """Lease a pending (or lease-expired) step of a live turn; None means someone else has it."""
    params = _params(step_id, lease_s, holder)
    row = _CLAIM_ALONE.first(db, params)
    return None if row is None else Claim.of(row)


def claim_model_step(
    db: Executor,
    step_id: uuid.UUID,
    *,
    lease_s: float,
    window: int,
    holder: Holder,
    tool_limits: bool = False,
    recoveries: bool = False,
) -> tuple[Claim, ModelStepView] | None:
    """`claim_step`, with what a model step reads about its turn and session, the last
    `window` messages of its history and what its plan is resolved from (`PlanParams`), in
    one round trip; None means someone else has it."""
    plan = PlanParams(window=window, tool_limits=tool_limits, recoveries=recoveries)
    params = ClaimWithViewParams(**_params(step_id, lease_s, holder), **plan)
    row = _CLAIM_WITH_VIEW.first(db, params)
    return None if row is None else (Claim.of(row), ModelStepView.of(row))


def claim_tool_step(
    db: Executor, step_id: uuid.UUID, *, lease_s: float, holder: Holder
) -> tuple[Claim, ToolStepView] | None:
    """`claim_step` for a tool step, with its call and session, in one round trip; None
    means someone else has it."""
    params = _params(step_id, lease_s, holder)
    row = _CLAIM_WITH_CALL.first(db, params)
    return None if row is None else (Claim.of(row), ToolStepView.of(row))


def model_step_view(
    db: Executor,
    step_id: uuid.UUID,
    *,
    window: int,
    tool_limits: bool = False,
    recoveries: bool = False,
) -> ModelStepView:
    """What `claim_model_step` reads with a claim, for a step as it is (to inspect the
    context a step saw, without claiming it)."""
    params = ViewParams(
        step_id=step_id, window=window, tool_limits=tool_limits, recoveries=recoveries
    )
    return ModelStepView.of(_STEP_VIEW.one(db, params))
