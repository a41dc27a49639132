"""Retention's statements: what is due per tenant (finished turns, with their steps, messages
and tool calls, and audit rows older than the tenant's cut-off) and its deletion in small
batches.

Each batch is one short transaction that deletes at most `batch` turns (their steps, messages,
tool calls and proposals go with them: `ON DELETE CASCADE`) or `batch` audit rows, picked with
`FOR UPDATE SKIP LOCKED` so that it never waits on a row someone else holds and never holds
many locks for long. See docs/retention.md.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session as Db

from ..vocabulary import TERMINAL_TURN_STATUSES
from .models import Decision, Message, Step, Tenant, ToolCallRow, Turn


@dataclass(frozen=True, slots=True)
class Due:
    """What retention would delete of one tenant."""

    tenant: str
    cutoff: datetime
    turns: int
    steps: int
    messages: int
    tool_calls: int
    decisions: int

    @property
    def total(self) -> int:
        return self.turns + self.steps + self.messages + self.tool_calls + self.decisions


def tenants(db: Db) -> list[tuple[uuid.UUID, str]]:
    """Every tenant's (id, name)."""
    return [(r.id, r.name) for r in db.execute(select(Tenant.id, Tenant.name)).all()]


def _due_turns(tenant_id: uuid.UUID, cutoff: datetime) -> Select[Any]:
    return select(Turn.id).where(
        Turn.tenant_id == tenant_id,
        Turn.finished_at.is_not(None),
        Turn.finished_at < cutoff,
        Turn.status.in_(TERMINAL_TURN_STATUSES),
    )


def _due_decisions(tenant_id: uuid.UUID, cutoff: datetime) -> Select[Any]:
    return select(Decision.id).where(Decision.tenant_id == tenant_id, Decision.created_at < cutoff)


def _count(db: Db, query: Select[Any]) -> int:
    return int(db.execute(query).scalar_one())


def count_due(db: Db, tenant_id: uuid.UUID, name: str, cutoff: datetime) -> Due:
    """What a run would delete of this tenant now."""
    turns = _due_turns(tenant_id, cutoff)
    return Due(
        tenant=name,
        cutoff=cutoff,
        turns=_count(db, select(func.count()).select_from(turns.subquery())),
        steps=_count(db, select(func.count()).where(Step.turn_id.in_(turns))),
        messages=_count(db, select(func.count()).where(Message.turn_id.in_(turns))),
        tool_calls=_count(db, select(func.count()).where(ToolCallRow.turn_id.in_(turns))),
        decisions=_count(
            db, select(func.count()).select_from(_due_decisions(tenant_id, cutoff).subquery())
        ),
    )


def delete_turns_batch(db: Db, tenant_id: uuid.UUID, cutoff: datetime, *, batch: int) -> int:
    """Delete up to `batch` due turns of the tenant (with everything under them); returns how
    many."""
    picked = _due_turns(tenant_id, cutoff).limit(batch).with_for_update(skip_locked=True)
    result = db.execute(delete(Turn).where(Turn.id.in_(picked)).returning(Turn.id))
    return len(result.all())


def delete_decisions_batch(db: Db, tenant_id: uuid.UUID, cutoff: datetime, *, batch: int) -> int:
    """Delete up to `batch` due audit rows of the tenant; returns how many."""
    picked = _due_decisions(tenant_id, cutoff).limit(batch).with_for_update(skip_locked=True)
    result = db.execute(delete(Decision).where(Decision.id.in_(picked)).returning(Decision.id))
    return len(result.all())
