"""What the tool loop's guards read: earlier calls of the turn, siblings still open, and the
session's own limits (docs/checkpoints.md, "Guarding the tool loop")."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, cast, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session as Db

from ..vocabulary import OPEN_STEP_STATUSES, StepKind
from .models import sessions_table, steps_table, tool_calls_table

_s = steps_table.c
_c = tool_calls_table.c

Executor = Db | Connection


@dataclass(frozen=True, slots=True)
class Earlier:
    """What came before one tool call of a turn (ordered by step number)."""

    same_arguments: int
    """Calls of the same tool with the same (canonical: JSONB-equal) arguments."""
    same_tool: int
    """Calls of the same tool."""
    open_siblings: int
    """Tool steps of the same batch, earlier in it, not finished yet."""
    session_metadata: dict[str, Any] | None


def earlier(
    db: Executor,
    *,
    turn_id: uuid.UUID,
    session_id: uuid.UUID,
    step_no: int,
    parent_step_id: uuid.UUID | None,
    name: str,
    arguments: dict[str, Any],
) -> Earlier:
    """One round trip."""
    before = and_(_s.turn_id == turn_id, _s.kind == StepKind.TOOL, _s.step_no < step_no)
    calls = (
        select(_c.arguments)
        .select_from(steps_table.join(tool_calls_table, _c.id == _s.tool_call_id))
        .where(before, _c.name == name)
        .subquery()
    )
    same_args = select(func.count()).where(calls.c.arguments == cast(arguments, JSONB))
    same_tool = select(func.count()).select_from(calls)
    open_siblings = select(func.count()).where(
        before,
        _s.parent_step_id == parent_step_id,
        _s.status.in_(OPEN_STEP_STATUSES),
    )
    meta = select(sessions_table.c["metadata"]).where(sessions_table.c.id == session_id)
    row = db.execute(
        select(
            same_args.scalar_subquery().label("same_args"),
            same_tool.scalar_subquery().label("same_tool"),
            open_siblings.scalar_subquery().label("open_siblings"),
            meta.scalar_subquery().label("meta"),
        )
    ).one()
    return Earlier(row.same_args, row.same_tool, row.open_siblings, row.meta)


def calls_per_tool(db: Executor, turn_id: uuid.UUID) -> dict[str, int]:
    """How many times each tool was called so far in the turn."""
    rows = db.execute(
        select(_c.name, func.count()).where(_c.turn_id == turn_id).group_by(_c.name)
    ).all()
    return {name: n for name, n in rows}


def session_metadata(db: Executor, session_id: uuid.UUID) -> dict[str, Any] | None:
    meta: dict[str, Any] | None = db.execute(
        select(sessions_table.c["metadata"]).where(sessions_table.c.id == session_id)
    ).scalar_one_or_none()
    return meta
