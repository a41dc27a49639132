"""Proposals: created once per propose_action call, decided once, expired by the sweeper."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TypedDict

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session as Db

from ..messages import JsonObject
from ..vocabulary import ProposalStatus
from .models import Proposal
from .repo import now, storable_json, storable_text


class ProposalDoc(TypedDict):
    """A proposal's row as JSON (`row_to_json`): what the statement that stores it returns."""

    id: str
    action: str
    product: str
    rationale: str
    status: str
    params: JsonObject
    blast_radius: str | None
    reversible: bool | None
    expires_at: str | None


NAMESPACE = uuid.UUID("5b0f4f36-3d51-4c8e-9a51-1f3f4ad5e0c1")


def proposal_id_for(tool_call_id: uuid.UUID) -> uuid.UUID:
    """The same call always makes the same proposal (a redelivered tool step is a no-op)."""
    return uuid.uuid5(NAMESPACE, str(tool_call_id))


def create(
    db: Db,
    *,
    tool_call_id: uuid.UUID,
    ttl_s: float,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    action: str,
    product: str,
    params: JsonObject,
    rationale: str,
    blast_radius: str | None = None,
    reversible: bool | None = None,
) -> uuid.UUID:
    """Store the proposal of a `propose_action` call (once: see `proposal_id_for`), pending
    for `ttl_s`."""
    pid = proposal_id_for(tool_call_id)
    db.execute(
        insert(Proposal)
        .values(
            id=pid,
            tool_call_id=tool_call_id,
            status=ProposalStatus.PENDING,
            expires_at=func.now() + timedelta(seconds=ttl_s),
            tenant_id=tenant_id,
            session_id=session_id,
            turn_id=turn_id,
            action=storable_text(action),
            product=storable_text(product),
            params=storable_json(params),
            rationale=storable_text(rationale),
            blast_radius=None if blast_radius is None else storable_text(blast_radius),
            reversible=reversible,
        )
        .on_conflict_do_nothing()
    )
    return pid


def get(db: Db, proposal_id: uuid.UUID, *, tenant_id: uuid.UUID) -> Proposal | None:
    return db.execute(
        select(Proposal).where(Proposal.id == proposal_id, Proposal.tenant_id == tenant_id)
    ).scalar_one_or_none()


def of_session(db: Db, session_id: uuid.UUID) -> Sequence[Proposal]:
    return (
        db.execute(
            select(Proposal).where(Proposal.session_id == session_id).order_by(Proposal.created_at)
        )
        .scalars()
        .all()
    )


def decide(db: Db, proposal_id: uuid.UUID, *, status: ProposalStatus) -> Proposal | None:
    """pending → `status` (confirmed or rejected) unless it expired; None if not pending."""
    return db.execute(
        update(Proposal)
        .where(
            Proposal.id == proposal_id,
            Proposal.status == ProposalStatus.PENDING,
            Proposal.expires_at > func.now(),
        )
        .values(status=status, decided_at=now())
        .returning(Proposal)
    ).scalar_one_or_none()


def expire_due(db: Db, *, limit: int = 200) -> Sequence[Proposal]:
    """Pending proposals past their time: now expired."""
    due = (
        select(Proposal.id)
        .where(Proposal.status == ProposalStatus.PENDING, Proposal.expires_at <= func.now())
        .limit(limit)
    )
    return (
        db.execute(
            update(Proposal)
            .where(Proposal.id.in_(due.scalar_subquery()))
            .values(status=ProposalStatus.EXPIRED, decided_at=now())
            .returning(Proposal)
        )
        .scalars()
        .all()
    )


def claim_execution(db: Db, proposal_id: uuid.UUID) -> Proposal | None:
    """confirmed → executing, once: only one executor ever runs a proposal."""
    return db.execute(
        update(Proposal)
        .where(Proposal.id == proposal_id, Proposal.status == ProposalStatus.CONFIRMED)
        .values(status=ProposalStatus.EXECUTING, execution_started_at=now())
        .returning(Proposal)
    ).scalar_one_or_none()


def record_execution(
    db: Db, proposal_id: uuid.UUID, *, ok: bool, outcome: JsonObject
) -> Proposal | None:
    return db.execute(
        update(Proposal)
        .where(Proposal.id == proposal_id, Proposal.status == ProposalStatus.EXECUTING)
        .values(
            status=ProposalStatus.EXECUTED if ok else ProposalStatus.EXECUTION_FAILED,
            executed_at=now(),
            outcome=storable_json(outcome),
        )
        .returning(Proposal)
    ).scalar_one_or_none()


def stuck_confirmed(db: Db, *, older_than_s: float) -> Sequence[uuid.UUID]:
    """Confirmed proposals whose execution was never handed over (a lost publish)."""
    return (
        db.execute(
            select(Proposal.id).where(
                Proposal.status == ProposalStatus.CONFIRMED,
                Proposal.decided_at < func.now() - timedelta(seconds=older_than_s),
            )
        )
        .scalars()
        .all()
    )


def fail_lost_executions(db: Db, *, older_than_s: float) -> Sequence[Proposal]:
    """Executions whose worker died: marked failed (never re-run: the effect may have
    happened, so the operator decides)."""
    lost = select(Proposal.id).where(
        Proposal.status == ProposalStatus.EXECUTING,
        Proposal.execution_started_at < func.now() - timedelta(seconds=older_than_s),
    )
    return (
        db.execute(
            update(Proposal)
            .where(Proposal.id.in_(lost.scalar_subquery()))
            .values(
                status=ProposalStatus.EXECUTION_FAILED,
                executed_at=now(),
                outcome={
                    "error": "the worker running the executor stopped before reporting; "
                    "the outcome is unknown and the action was not retried"
                },
            )
            .returning(Proposal)
        )
        .scalars()
        .all()
    )
