"""Budget SQL: reserve before a model call where a limit exists, settle after it, and the
counters each settlement moves.

A reservation takes, in one statement (`cortex_reserve`, migration 0016), the counter of every
scope with a limit (`global` and `tenant:ID` for the day, `session:ID` for the session's
life), in key order, all or nothing: each by a conditional upsert that admits the whole
amount only if `spent + reserved + amount <= limit`; the reservation row records the scopes it
took. A scope without a limit is never reserved: it is counted when the call is settled,
inside the statement that ends the step (`store.step_commit`), as a call that held nothing
stores its usage row there. Settling moves what a reservation held out of `reserved` and its
real cost into `spent`; a limited money scope's alert fires at most once per window. A call
the reconciler settled at its reserved amount (its worker's lease ran out) that then finishes
after all is corrected down to its real cost.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, text

from ..budget.windows import NO_WINDOW, Window
from ..vocabulary import BudgetScope
from .db import autocommit_connection
from .step_record_rows import CounterMove, SpendCase


@dataclass(frozen=True, slots=True)
class ScopeLimit:
    """One counter a call goes through, with the limit in force (None: unlimited)."""

    scope: BudgetScope
    key: str
    """`global`, `tenant:ID` or `session:ID`."""
    window: Window
    limit: int | None


@dataclass(frozen=True, slots=True)
class CallToReserve:
    """What one model call attempt asks to hold."""

    step_id: uuid.UUID
    attempt: int
    turn_id: uuid.UUID
    tenant_id: uuid.UUID
    session_id: uuid.UUID
    user: str | None
    provider: str
    model: str
    amount_micros: int
    tokens: int
    call_no: int
    """0 for the attempt's call, 1 for a second call of the same attempt."""
    scopes: tuple[ScopeLimit, ...]
    """The global and the tenant's day, the session's tokens: those with a limit are taken."""
    session_tokens: int = 0
    """What the session used before its counter existed (its first reservation starts there)."""


@dataclass(frozen=True, slots=True)
class Reservation:
    id: uuid.UUID
    amount_micros: int
    tokens: int
    scopes: tuple[str, ...] = ()
    """The counters it took (see the module's doc)."""
    day_start: datetime = NO_WINDOW


@dataclass(frozen=True, slots=True)
class Refusal:
    """The scope that could not take the whole reservation, and where it stood."""

    scope: BudgetScope
    limit: int
    spent: int
    reserved: int
    asked: int
    resets_at: datetime | None


@dataclass(frozen=True, slots=True)
class Alert:
    """A scope whose spend crossed its alert threshold in this settlement (once per window)."""

    key: str
    spent: int
    limit: int


class ScopeRefused(Exception):
    """Raised by `take_scope` inside a reservation's transaction: it rolls the whole back."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal


_RESERVE = text(
    "SELECT * FROM cortex_reserve(:id, :step_id, :attempt, :call_no, :tenant_id, :session_id, "
    ":turn_id, :user, :provider, :model, :day_start, :amount, :tokens, "
    "CAST(:keys AS TEXT[]), CAST(:starts AS TIMESTAMPTZ[]), CAST(:resets AS TIMESTAMPTZ[]), "
    "CAST(:limits AS BIGINT[]), CAST(:amounts AS BIGINT[]), CAST(:initial AS BIGINT[]))"
)


def reserve(engine: Engine, call: CallToReserve) -> Reservation | Refusal:
    """Hold the call's maximum cost in every scope with a limit, all or nothing, in one
    statement (a repeated call of the same attempt gets the reservation it holds)."""
    limited = sorted((s for s in call.scopes if s.limit is not None), key=lambda s: s.key)
    amounts = [
        call.tokens if s.scope is BudgetScope.SESSION else call.amount_micros for s in limited
    ]
    initial = [call.session_tokens if s.scope is BudgetScope.SESSION else 0 for s in limited]
    day = next(s.window for s in call.scopes if s.scope is not BudgetScope.SESSION)
    with autocommit_connection(engine) as conn:
        row = conn.execute(
            _RESERVE,
            {
                "id": uuid.uuid4(),
                "step_id": call.step_id,
                "attempt": call.attempt,
                "call_no": call.call_no,
                "tenant_id": call.tenant_id,
                "session_id": call.session_id,
                "turn_id": call.turn_id,
                "user": call.user,
                "provider": call.provider,
                "model": call.model,
                "day_start": day.start,
                "amount": call.amount_micros,
                "tokens": call.tokens,
                "keys": [s.key for s in limited],
                "starts": [s.window.start for s in limited],
                "resets": [s.window.resets_at for s in limited],
                "limits": [s.limit for s in limited],
                "amounts": amounts,
                "initial": initial,
            },
        ).one()
    if row.reservation_id is None:
        refused = next(s for s in limited if s.key == row.refused_key)
        asked = amounts[limited.index(refused)]
        assert refused.limit is not None
        return Refusal(
            refused.scope, refused.limit, row.spent, row.reserved, asked, refused.window.resets_at
        )
    taken = tuple(s.key for s in limited)
    return Reservation(row.reservation_id, row.amount, row.tokens, taken, day.start)


_TAKE = text(
    """
    INSERT INTO budget_counters AS c (scope, window_start, resets_at, limit_amount, reserved)
    SELECT :key, :start, :resets_at, CAST(:limit AS BIGINT), :amount
    WHERE CAST(:limit AS BIGINT) IS NULL OR :amount <= :limit
    ON CONFLICT (scope, window_start) DO UPDATE
    SET reserved = c.reserved + :amount, limit_amount = CAST(:limit AS BIGINT)
    WHERE CAST(:limit AS BIGINT) IS NULL OR c.spent + c.reserved + :amount <= :limit
    RETURNING c.spent
    """
)
"""The conditional update of one scope's counter (an upsert: the day's first call creates it):
it takes the whole amount only if it fits under the limit in force, else changes nothing.
Used by a job's reservation (`store.job_budget`), which takes both money scopes."""
_READ_COUNTER = text(
    "SELECT spent, reserved FROM budget_counters WHERE scope = :key AND window_start = :start"
)


def take_scope(conn: Connection, limit: ScopeLimit, amount: int) -> None:
    key = {"key": limit.key, "start": limit.window.start}
    params = {**key, "resets_at": limit.window.resets_at, "amount": amount, "limit": limit.limit}
    taken = conn.execute(_TAKE, params).first()
    if taken is None:
        assert limit.limit is not None
        current = conn.execute(_READ_COUNTER, key).first()
        spent, reserved = (current.spent, current.reserved) if current is not None else (0, 0)
        raise ScopeRefused(
            Refusal(limit.scope, limit.limit, spent, reserved, amount, limit.window.resets_at)
        )


def money_keys(tenant_id: uuid.UUID) -> tuple[str, str]:
    return "global", f"tenant:{tenant_id}"


def settlement_moves(
    held: Reservation,
    *,
    money: tuple[str, str],
    session_key: str | None,
    resets_at: datetime | None,
    cost_micros: int | None,
    used_tokens: int | None,
) -> dict[SpendCase, tuple[CounterMove, ...]]:
    """How settling `held` moves the counters: `settled` now (what it held leaves `reserved`
    of the scopes it took; its cost, or what it held when `cost_micros` is None, goes into
    `spent` of both money scopes), or `corrected` (the reconciler had settled it at what it
    held: only the difference, down)."""
    cost = held.amount_micros if cost_micros is None else cost_micros
    tokens = held.tokens if used_tokens is None else used_tokens
    settled: list[CounterMove] = []
    corrected: list[CounterMove] = []
    for key in money:
        taken = key in held.scopes
        reserved = -held.amount_micros if taken else 0
        settled.append(CounterMove(key, held.day_start, resets_at, reserved, cost))
        corrected.append(CounterMove(key, held.day_start, resets_at, 0, cost - held.amount_micros))
    if session_key is not None and session_key in held.scopes:
        settled.append(CounterMove(session_key, NO_WINDOW, None, -held.tokens, tokens))
        corrected.append(CounterMove(session_key, NO_WINDOW, None, 0, tokens - held.tokens))
    return {"settled": tuple(settled), "corrected": tuple(corrected)}


def usage_moves(
    *, money: tuple[str, str], day: Window, cost_micros: int
) -> dict[SpendCase, tuple[CounterMove, ...]]:
    """A call that held nothing: its cost counted in both money scopes."""
    return {"used": tuple(CounterMove(k, day.start, day.resets_at, 0, cost_micros) for k in money)}
