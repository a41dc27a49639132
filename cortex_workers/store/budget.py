"""Budget SQL: reserve before a model call, settle after it, read what was spent.

A reservation goes through one counter row per scope (`global` and `tenant:ID` for the day,
`session:ID` for the session's life; a job's call has none), always in that order, so
concurrent reservations never deadlock. Each counter is taken by one conditional UPDATE that
admits the whole amount only if `spent + reserved + amount <= limit`; the reservation row and
the counters of every scope with a limit commit together or not at all. The day counter of a
scope without a limit (the global one, or the tenant's, when none is set) is moved after that
commit, by one statement of its own: every call of the deployment shares those rows, and a lock
on them held across a transaction's round trips made every call wait in line. Settling moves
the reservation's amount out of `reserved` and its real cost into `spent`, then fires each
scope's alert at most once per window (a conditional UPDATE of `alerted_at`). A call the
reconciler settled at its reserved amount (its worker's lease ran out) that then finishes after
all is corrected down to its real cost.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, text

from ..budget.windows import NO_WINDOW, Window
from ..vocabulary import (
    BudgetScope,
    JobStatus,
    ReservationStatus,
    StepStatus,
    WebhookEventType,
)
from .db import autocommit_connection
from .webhooks import record_event


@dataclass(frozen=True, slots=True)
class ScopeLimit:
    """One counter a reservation goes through, with the limit in force (None: unlimited)."""

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
    provider: str
    model: str
    amount_micros: int
    tokens: int
    call_no: int
    """0 for the attempt's call, 1 for a second call of the same attempt."""
    money: tuple[ScopeLimit, ScopeLimit]
    """The global and the tenant's day, in that order."""
    session: ScopeLimit
    """The session's token cap."""


@dataclass(frozen=True, slots=True)
class Reservation:
    id: uuid.UUID
    amount_micros: int
    tokens: int
    counted_after: tuple[str, ...] = ()
    """Counters of scopes without a limit, counted after the reservation's transaction (one
    statement each, so no lock on a counter every call shares is held across round trips);
    settling moves them the same way."""


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


_INSERT_RESERVATION = text(
    """
    INSERT INTO budget_reservations (id, step_id, attempt, call_no, tenant_id, session_id,
        turn_id, "user", provider, model, day_start, status, amount_micros, tokens)
    SELECT :id, :step_id, :attempt, :call_no, :tenant_id, :session_id, t.id,
        COALESCE(t."user", s."user"), :provider, :model, :day_start, :status, :amount, :tokens
    FROM turns t JOIN sessions s ON s.id = t.session_id
    WHERE t.id = :turn_id
    ON CONFLICT (step_id, attempt, call_no) DO NOTHING
    RETURNING id
    """
)
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
it takes the whole amount only if it fits under the limit in force, else changes nothing."""
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


def reserve(engine: Engine, call: CallToReserve) -> Reservation | Refusal:
    """Hold the call's maximum cost in every scope, all or nothing, in one transaction."""
    reservation_id = uuid.uuid4()
    try:
        with engine.begin() as conn:
            inserted = conn.execute(
                _INSERT_RESERVATION,
                {
                    "id": reservation_id,
                    "step_id": call.step_id,
                    "attempt": call.attempt,
                    "call_no": call.call_no,
                    "tenant_id": call.tenant_id,
                    "session_id": call.session_id,
                    "turn_id": call.turn_id,
                    "provider": call.provider,
                    "model": call.model,
                    "day_start": call.money[0].window.start,
                    "status": ReservationStatus.RESERVED.value,
                    "amount": call.amount_micros,
                    "tokens": call.tokens,
                },
            ).first()
            if inserted is None:  # this attempt already holds one (a repeated call)
                return _existing(conn, call)
            for limit in call.money:
                if limit.limit is not None:
                    take_scope(conn, limit, call.amount_micros)
            take_scope(conn, call.session, call.tokens)
    except ScopeRefused as refused:
        return refused.refusal
    unlimited = [limit for limit in call.money if limit.limit is None]
    if unlimited:
        with autocommit_connection(engine) as conn:
            for limit in unlimited:
                take_scope(conn, limit, call.amount_micros)
    after = tuple(limit.key for limit in unlimited)
    return Reservation(reservation_id, call.amount_micros, call.tokens, after)


def _existing(conn: Connection, call: CallToReserve) -> Reservation:
    row = conn.execute(
        text(
            "SELECT id, amount_micros, tokens FROM budget_reservations "
            "WHERE step_id = :step_id AND attempt = :attempt AND call_no = :call_no"
        ),
        {"step_id": call.step_id, "attempt": call.attempt, "call_no": call.call_no},
    ).one()
    return Reservation(row.id, row.amount_micros, row.tokens)


_CLOSE = text(
    """
    UPDATE budget_reservations
    SET status = :settled, settled_at = now(), settled_by = :by,
        cost_micros = COALESCE(CAST(:cost AS BIGINT), amount_micros),
        input_tokens = :input_tokens, output_tokens = :output_tokens
    WHERE id = :id AND status = :reserved
    RETURNING amount_micros, tokens, cost_micros, tenant_id, session_id, day_start
    """
)
_SETTLE_COUNTER = text(
    """
    UPDATE budget_counters
    SET reserved = reserved - :held, spent = spent + :used
    WHERE scope = :key AND window_start = :start
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


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a call cost: None for the reserved amount (a failed call or a dead worker)."""

    cost_micros: int | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    by: str = "call"


def settle(
    engine: Engine,
    reservation_id: uuid.UUID,
    outcome: Settlement,
    *,
    alert_at_pct: float,
    counted_after: tuple[str, ...] = (),
) -> list[Alert]:
    """Close the reservation at its real cost (once: a second settle changes nothing). The
    counters in `counted_after` (`Reservation.counted_after`) move after the transaction."""
    later: list[dict[str, object]] = []
    with engine.begin() as conn:
        alerts = _settle(conn, reservation_id, outcome, alert_at_pct, counted_after, later)
    if later:
        with autocommit_connection(engine) as conn:
            for move in later:
                conn.execute(_SETTLE_COUNTER, move)
    return alerts


def _settle(
    conn: Connection,
    reservation_id: uuid.UUID,
    outcome: Settlement,
    alert_at_pct: float,
    counted_after: tuple[str, ...] = (),
    later: list[dict[str, object]] | None = None,
) -> list[Alert]:
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
    if row is not None:
        held, used, tokens_held = row.amount_micros, row.cost_micros, row.tokens
    elif outcome.by == "call" and outcome.cost_micros is not None:
        # The reconciler took the worker for dead and settled the call at its reserved
        # amount; the call did finish: its real cost replaces that (spend only goes down).
        row = conn.execute(_CORRECT, params).first()
        if row is None:
            return []  # settled already
        held, used, tokens_held = 0, outcome.cost_micros - row.amount_micros, 0
    else:
        return []  # settled already
    used_tokens = (
        row.tokens
        if outcome.input_tokens is None
        else (outcome.input_tokens or 0) + (outcome.output_tokens or 0)
    )
    money = [("global", row.day_start), (f"tenant:{row.tenant_id}", row.day_start)]
    for key, start in money:
        move = {"key": key, "start": start, "held": held, "used": used}
        if later is not None and key in counted_after:
            later.append(move)
        else:
            conn.execute(_SETTLE_COUNTER, move)
    money = [(key, start) for key, start in money if later is None or key not in counted_after]
    if row.session_id is not None:  # a job's call holds no session's tokens
        session = {"key": f"session:{row.session_id}", "start": NO_WINDOW}
        used_tokens -= row.tokens if tokens_held == 0 else 0
        conn.execute(_SETTLE_COUNTER, {**session, "held": tokens_held, "used": used_tokens})
    alerts = []
    for key, start in money:
        hit = conn.execute(_ALERT, {"key": key, "start": start, "pct": alert_at_pct}).first()
        if hit is not None:
            alerts.append(Alert(key, hit.spent, hit.limit_amount))
            if key.startswith("tenant:"):  # the tenant's webhooks hear of it (docs/webhooks.md)
                _announce(conn, row.tenant_id, hit.spent, hit.limit_amount, alert_at_pct)
    return alerts


def _announce(
    conn: Connection, tenant_id: uuid.UUID, spent: int, limit: int, alert_at_pct: float
) -> None:
    """A `budget.alert` webhook event, in the transaction that fired the alert."""
    data = {
        "tenant_id": str(tenant_id),
        "scope": BudgetScope.TENANT.value,
        "spent_usd": spent / 1e6,
        "limit_usd": limit / 1e6,
        "alert_at_pct": alert_at_pct,
    }
    record_event(conn, tenant_id, WebhookEventType.BUDGET_ALERT, data)


_CORRECT = text(
    """
    UPDATE budget_reservations
    SET settled_by = :by, cost_micros = :cost,
        input_tokens = :input_tokens, output_tokens = :output_tokens
    WHERE id = :id AND status = :settled AND settled_by = 'reconciler'
      AND CAST(:cost AS BIGINT) <= amount_micros
    RETURNING amount_micros, tokens, tenant_id, session_id, day_start
    """
)


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
            alerts += _settle(conn, reservation_id, Settlement(None, by="reconciler"), alert_at_pct)
    return len(found), alerts
