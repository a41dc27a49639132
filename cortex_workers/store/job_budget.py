"""Budget SQL of LLM-function jobs: a job's model call reserves its maximum cost in the global
and the tenant's daily budgets (a job has no session, so no token cap), with the same
conditional updates as a turn's step (`store.budget`), and is settled by the same `settle`.

A reservation is keyed by (job, run, call number): a repeated delivery of the same run finds
the one it holds; a later run (its worker died) makes its own, and the reconciler settles the
dead run's at the reserved amount (`store.settlement.settle_orphans`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text

from ..vocabulary import ReservationStatus
from .budget import Refusal, Reservation, ScopeLimit, ScopeRefused, take_scope


@dataclass(frozen=True, slots=True)
class JobCallToReserve:
    """What one model call of a job asks to hold."""

    job_id: uuid.UUID
    run: int
    """The job's run (its `attempt` column) that makes the call."""
    call_no: int
    """The call's number in the job (from 1)."""
    tenant_id: uuid.UUID
    provider: str
    model: str
    amount_micros: int
    tokens: int
    money: tuple[ScopeLimit, ScopeLimit]
    """The global and the tenant's day, in that order."""


_INSERT = text(
    """
    INSERT INTO budget_reservations (id, job_id, attempt, call_no, tenant_id, provider, model,
        day_start, status, amount_micros, tokens, scopes)
    VALUES (:id, :job_id, :run, :call_no, :tenant_id, :provider, :model, :day_start, :status,
        :amount, :tokens, CAST(:scopes AS TEXT[]))
    ON CONFLICT (job_id, attempt, call_no) DO NOTHING
    RETURNING id
    """
)
_EXISTING = text(
    "SELECT id, amount_micros, tokens, scopes, day_start FROM budget_reservations "
    "WHERE job_id = :job_id AND attempt = :run AND call_no = :call_no"
)


def reserve_job_call(engine: Engine, call: JobCallToReserve) -> Reservation | Refusal:
    """Hold the call's maximum cost in both daily scopes, all or nothing, in one transaction."""
    reservation_id = uuid.uuid4()
    key = {"job_id": call.job_id, "run": call.run, "call_no": call.call_no}
    try:
        with engine.begin() as conn:
            inserted = conn.execute(
                _INSERT,
                {
                    **key,
                    "id": reservation_id,
                    "tenant_id": call.tenant_id,
                    "provider": call.provider,
                    "model": call.model,
                    "day_start": call.money[0].window.start,
                    "status": ReservationStatus.RESERVED.value,
                    "amount": call.amount_micros,
                    "tokens": call.tokens,
                    "scopes": [limit.key for limit in call.money],
                },
            ).first()
            if inserted is None:  # this run already holds one for the call (a redelivery)
                return _existing(conn, key)
            for limit in call.money:
                take_scope(conn, limit, call.amount_micros)
    except ScopeRefused as refused:
        return refused.refusal
    scopes = tuple(limit.key for limit in call.money)
    return Reservation(
        reservation_id, call.amount_micros, call.tokens, scopes, call.money[0].window.start
    )


def _existing(conn: Connection, key: dict[str, object]) -> Reservation:
    row = conn.execute(_EXISTING, key).one()
    return Reservation(
        row.id, row.amount_micros, row.tokens, tuple(row.scopes or ()), row.day_start
    )
