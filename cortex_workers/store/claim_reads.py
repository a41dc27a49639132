"""What a step's claim reads beyond the step itself, in the same statement (`store.claims`):
for a model step, what its plan is resolved from (`turns.step_plan`); for a tool step, what
the loop's guards read (`turns.guards.loop`). An optional read sits under a `CASE` on its
condition, so it costs nothing when the feature is off."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, bindparam, case, cast, func, null, or_, select
from sqlalchemy.dialects.postgresql import UUID, aggregate_order_by

from ..vocabulary import OPEN_STEP_STATUSES, RecoveryAction, StepKind, TimelineKind
from .models import (
    Tenant,
    agent_tasks_table,
    sessions_table,
    steps_table,
    tool_calls_table,
    turns_table,
)
from .sql import const
from .timeline import timeline_table
from .whiteboard import board_view

_t = turns_table.c

BOARD_DECISIONS, BOARD_UPDATES = 3, 5
"""The recent decisions and updates of a whiteboard that a model step's context shows."""


def plan_columns(step: Any) -> list[Any]:
    """What the step plan is resolved from, beyond the context: the tenant's limits, the
    end user, the session's agents and whiteboard (and its parent's), the task a follow-up
    answers, the turn's calls per tool, the parent's tool batch and the turn's retries. An
    optional read costs nothing when its condition is false (a `CASE` is not evaluated)."""
    c, ss, tn = step.c, sessions_table.c, Tenant.__table__.c
    tc, a, tl = tool_calls_table.c, agent_tasks_table.c, timeline_table.c
    trigger = _t.trigger
    task_id = case(
        (trigger["kind"].astext == const("task"), cast(trigger["task_id"].astext, UUID)),
        else_=null(),
    )
    task = (
        select(func.json_build_object(*_pairs(a, ("id", "agent", "status", "result", "error"))))
        .where(a.id == task_id)
        .scalar_subquery()
    )
    per_tool = select(tc.name, func.count().label("n")).where(tc.turn_id == c.turn_id)
    per_tool_sq = per_tool.group_by(tc.name).correlate_except(tool_calls_table).subquery()
    counts = select(func.json_object_agg(per_tool_sq.c.name, per_tool_sq.c.n)).scalar_subquery()
    wants_counts = or_(
        bindparam("tool_limits", type_=Boolean), ss["metadata"].has_key(const("tool_call_limits"))
    )
    batch_fields = (
        "call_id", "name", "status", "result", "is_error", "truncated", "severity", "error_kind"
    )  # fmt: skip
    batch = (
        select(func.json_agg(func.json_build_object(*_pairs(tc, batch_fields))))
        .where(tc.step_id == c.parent_step_id)
        .scalar_subquery()
    )
    retried = (
        select(func.array_agg(aggregate_order_by(tl.step, tl.id)))
        .where(
            tl.turn_id == c.turn_id,
            tl.kind == const(TimelineKind.RECOVERY),
            tl.data["action"].astext == const(RecoveryAction.RETRY),
        )
        .scalar_subquery()
    )
    return [
        tn.daily_usd_limit_micros.label("tenant_daily_micros"),
        tn.session_token_cap.label("tenant_session_cap"),
        tn.per_user_hourly_limit.label("tenant_user_hourly"),
        _t.user.label("turn_user"),
        ss.user.label("session_user"),
        (ss.input_tokens + ss.output_tokens).label("session_tokens"),
        ss.agents,
        trigger.label("turn_trigger"),
        ss.parent_session_id,
        board_view(ss.id, decisions=BOARD_DECISIONS, updates=BOARD_UPDATES).label("board"),
        board_view(ss.parent_session_id, decisions=BOARD_DECISIONS, updates=BOARD_UPDATES).label(
            "parent_board"
        ),
        task.label("task"),
        case((wants_counts, counts), else_=null()).label("tool_counts"),
        case((c.parent_step_id.is_not(None), batch), else_=null()).label("batch"),
        case((bindparam("recoveries", type_=Boolean), retried), else_=null()).label("retried"),
    ]


def _pairs(table: Any, names: tuple[str, ...]) -> list[Any]:
    """`json_build_object` arguments: each name, then its column."""
    return [x for name in names for x in (const(name), table[name])]


def guard_columns(claimed: Any) -> list[Any]:
    """What the tool loop's guards read about a call (`turns.guards.loop`): the turn's earlier
    calls of the same tool (with the same arguments), and the batch's earlier calls still
    open."""
    c, tc = claimed.c, tool_calls_table.c
    earlier_steps, earlier_calls = steps_table.alias("earlier"), tool_calls_table.alias("ecall")
    es, ec = earlier_steps.c, earlier_calls.c
    before = (es.turn_id == c.turn_id, es.kind == const(StepKind.TOOL), es.step_no < c.step_no)
    calls = (
        select(ec.arguments)
        .select_from(earlier_steps.join(earlier_calls, ec.id == es.tool_call_id))
        .where(*before, ec.name == tc.name)
        .correlate_except(earlier_steps, earlier_calls)
        .subquery()
    )
    open_siblings = (
        select(func.count())
        .select_from(earlier_steps)
        .where(
            *before,
            es.parent_step_id == c.parent_step_id,
            es.status.in_([const(s) for s in OPEN_STEP_STATUSES]),
        )
        .correlate_except(earlier_steps)
        .scalar_subquery()
    )
    return [
        select(func.count())
        .select_from(calls)
        .where(calls.c.arguments == tc.arguments)
        .scalar_subquery()
        .label("same_arguments"),
        select(func.count()).select_from(calls).scalar_subquery().label("same_tool"),
        open_siblings.label("open_siblings"),
        sessions_table.c["metadata"].label("session_metadata"),
    ]
