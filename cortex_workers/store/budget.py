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
from ..vocabulary import BudgetScope, JobStatus, ReservationStatus, StepStatus
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


_CLOSE = text(
    """
    UPDATE budget_reservations
    SET status = :settled, settled_at = now(), settled_by = :by,
        cost_micros = COALESCE(CAST(:cost AS BIGINT), amount_micros),
        input_tokens = :input_tokens, output_tokens = :output_tokens
    WHERE id = :id AND status = :reserved
    RETURNING amount_micros, tokens, cost_micros, tenant_id, session_id, day_start, scopes
    """
)
_SETTLE_COUNTER = text(
    """
    UPDATE budget_counters
    SET reserved = reserved - :held, spent = spent + :used
    WHERE scope = :key AND window_start = :start
    """
)
_COUNT = text(
    """
    INSERT INTO budget_counters AS c (scope, window_start, spent) VALUES (:key, :start, :used)
    ON CONFLICT (scope, window_start) DO UPDATE SET spent = c.spent + :used
    """
)
_ALERT = text(
    """
    UPDATE budget_counters SET alerted_at = now()
    WHERE scope = :key AND window_start = :start AND alerted_at IS NULL
      AND limit_amount IS NOT NULL AND limit_amount > 0
      AND spent * 100 >= limit_amount * CAST(:pct AS NUMERIC)
    RETURNING spent, limit_amount
    """
)
_RECORD_ALERT = text(
    "SELECT cortex_record_event(:tenant, 'budget.alert', jsonb_build_object("
    "'tenant_id', CAST(:tenant AS TEXT), 'scope', 'tenant', 'spent_usd', :spent / 1e6, "
    "'limit_usd', :limit / 1e6, 'alert_at_pct', CAST(:pct AS NUMERIC)))"
)


_CORRECT = text(
    """
    UPDATE budget_reservations
    SET settled_by = :by, cost_micros = :cost,
        input_tokens = :input_tokens, output_tokens = :output_tokens
    WHERE id = :id AND status = :settled AND settled_by = 'reconciler'
      AND CAST(:cost AS BIGINT) <= amount_micros
    RETURNING amount_micros, tokens, cost_micros, tenant_id, session_id, day_start, scopes
    """
)


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a call cost: None for the reserved amount (a failed call or a dead worker)."""

    cost_micros: int | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    by: str = "call"


def settle_in(
    conn: Connection, reservation_id: uuid.UUID, outcome: Settlement, alert_at_pct: float
) -> list[Alert]:
    """Close the reservation (once: a second settle changes nothing) in the caller's
    transaction, moving its counters by the scopes it took (see the module's doc). For the
    reconciler, and for calls outside a step (a summary's, a job's)."""
    params = {
        "id": reservation_id,
        "by": outcome.by,
        "cost": outcome.cost_micros,
        "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens,
        "settled": ReservationStatus.SETTLED.value,
        "reserved": ReservationStatus.RESERVED.value,
    }
    row = conn.execute(_CLOSE, params).first()
    held = True
    if row is None and outcome.by == "call" and outcome.cost_micros is not None:
        # The reconciler took the worker for dead and settled the call at its reserved
        # amount; the call did finish: its real cost replaces that (spend only goes down).
        row, held = conn.execute(_CORRECT, params).first(), False
    if row is None:
        return []  # settled already
    scopes = set(row.scopes or ())
    used_tokens = (
        row.tokens
        if outcome.input_tokens is None
        else (outcome.input_tokens or 0) + (outcome.output_tokens or 0)
    )
    moves: list[tuple[str, dict[str, object], bool]] = []
    for key in money_keys(row.tenant_id):
        if held:
            used = row.cost_micros
            move = {"key": key, "start": row.day_start, "held": row.amount_micros, "used": used}
            moves.append((key, move, key in scopes))
        else:
            used = outcome.cost_micros - row.amount_micros
            moves.append((key, {"key": key, "start": row.day_start, "held": 0, "used": used}, True))
    session_key = f"session:{row.session_id}" if row.session_id is not None else None
    if session_key is not None and session_key in scopes:
        tokens = {"key": session_key, "start": NO_WINDOW}
        if held:
            tokens.update(held=row.tokens, used=used_tokens)
        else:
            tokens.update(held=0, used=used_tokens - row.tokens)
        moves.append((session_key, tokens, True))
    for _key, move, taken in sorted(moves, key=lambda m: m[0]):
        conn.execute(_SETTLE_COUNTER if taken else _COUNT, move)
    if not held:
        return []
    alerts = []
    for key in money_keys(row.tenant_id):
        if key not in scopes:
            continue
        hit = conn.execute(
            _ALERT, {"key": key, "start": row.day_start, "pct": alert_at_pct}
        ).first()
        if hit is None:
            continue
        alerts.append(Alert(key, hit.spent, hit.limit_amount))
        if key.startswith("tenant:"):  # the tenant's webhooks hear of it (docs/webhooks.md)
            conn.execute(
                _RECORD_ALERT,
                {
                    "tenant": row.tenant_id,
                    "spent": hit.spent,
                    "limit": hit.limit_amount,
                    "pct": alert_at_pct,
                },
            )
    return alerts


def settle(
    engine: Engine, reservation_id: uuid.UUID, outcome: Settlement, *, alert_at_pct: float
) -> list[Alert]:
    """`settle_in`, in a transaction of its own."""
    with engine.begin() as conn:
        return settle_in(conn, reservation_id, outcome, alert_at_pct)


_ORPHANS = text(
    """
    SELECT r.id FROM budget_reservations r
    LEFT JOIN steps st ON st.id = r.step_id
    LEFT JOIN jobs j ON j.id = r.job_id
    WHERE r.status = :reserved AND r.created_at < now() - make_interval(secs => :grace)
      AND CASE WHEN r.job_id IS NULL
          THEN st.id IS NULL OR st.attempt <> r.attempt OR st.status <> :leased
               OR st.lease_until < now()
          ELSE j.id IS NULL OR j.attempt <> r.attempt OR j.status <> :job_running
               OR j.lease_until IS NULL OR j.lease_until < now()
          END
    ORDER BY r.created_at
    LIMIT :batch
    FOR UPDATE OF r SKIP LOCKED
    """
)


def settle_orphans(
    engine: Engine, *, alert_at_pct: float, grace_s: float, batch: int = 200
) -> tuple[int, list[Alert]]:
    """Settle, at the reserved amount, reservations whose call no worker holds any more (the
    lease of its step or job expired, or another attempt or run, or the end of the turn or
    job, replaced it): the provider may have billed the call. Returns how many, and the
    alerts that fired."""
    alerts: list[Alert] = []
    with engine.begin() as conn:
        ids = conn.execute(
            _ORPHANS,
            {
                "reserved": ReservationStatus.RESERVED.value,
                "leased": StepStatus.LEASED.value,
                "job_running": JobStatus.RUNNING.value,
                "grace": grace_s,
                "batch": batch,
            },
        ).scalars()
        found = list(ids)
        for reservation_id in found:
            alerts += settle_in(
                conn, reservation_id, Settlement(None, by="reconciler"), alert_at_pct
            )
    return len(found), alerts
