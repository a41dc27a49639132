"""Settling a reservation by a statement of its own: the reconciler's (a call no worker holds
any more, at what it held) and a call outside a step's (a summary's, a job's). A step's own
calls are settled by the statement that ends the step (`store.step_commit`).

Settling moves what the reservation held out of `reserved` of the scopes it took and its cost
into `spent` of both money scopes, then fires each limited money scope's alert at most once
per window (a conditional update of `alerted_at`), with a `budget.alert` webhook event for the
tenant's. A call the reconciler settled at what it held that then finishes after all is
corrected down to its real cost.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import Connection, Engine, text

from ..budget.windows import NO_WINDOW
from ..vocabulary import JobStatus, ReservationStatus, StepStatus
from .budget import Alert, money_keys

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
    for taken, move in sorted(_moves(row, outcome, held=held), key=lambda m: str(m[1]["key"])):
        conn.execute(_SETTLE_COUNTER if taken else _COUNT, move)
    return _alerts(conn, row, alert_at_pct) if held else []


class CounterMove(TypedDict):
    """The parameters of a settlement's statement on one budget counter."""

    key: str
    start: datetime
    held: int
    """Leaves `reserved`."""
    used: int
    """Enters `spent`."""


def _moves(row: Any, outcome: Settlement, *, held: bool) -> list[tuple[bool, CounterMove]]:
    """(whether the reservation took the counter, the move) of each counter: what was held
    leaves `reserved` of the scopes it took, the cost enters `spent` of both money scopes (a
    correction: only the difference); a session's tokens where the cap took them."""
    scopes = set(row.scopes or ())
    moves: list[tuple[bool, CounterMove]] = []
    for key in money_keys(row.tenant_id):
        if held:
            move: CounterMove = {
                "key": key,
                "start": row.day_start,
                "held": row.amount_micros,
                "used": row.cost_micros,
            }
            moves.append((key in scopes, move))
        else:
            used = (outcome.cost_micros or 0) - row.amount_micros
            moves.append((True, {"key": key, "start": row.day_start, "held": 0, "used": used}))
    session_key = f"session:{row.session_id}" if row.session_id is not None else None
    if session_key is not None and session_key in scopes:
        used_tokens = (
            row.tokens
            if outcome.input_tokens is None
            else (outcome.input_tokens or 0) + (outcome.output_tokens or 0)
        )
        held_tokens, used = (row.tokens, used_tokens) if held else (0, used_tokens - row.tokens)
        moves.append(
            (True, {"key": session_key, "start": NO_WINDOW, "held": held_tokens, "used": used})
        )
    return moves


def _alerts(conn: Connection, row: Any, alert_at_pct: float) -> list[Alert]:
    """The alert of each limited money scope that crossed its threshold now (once per
    window), and the tenant's `budget.alert` webhook event."""
    alerts = []
    for key in money_keys(row.tenant_id):
        if key not in set(row.scopes or ()):
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
