"""The alert at `alert_at_pct` fires once per scope and window, however many settle at once."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest
from budget_support import held_step, new_tenant
from sqlalchemy import text
from support import Stack

from cortex_workers.budget import day_window, forever
from cortex_workers.observability import metrics
from cortex_workers.runtime import get_runtime
from cortex_workers.store import budget as budget_store
from cortex_workers.store import settlement
from cortex_workers.store import webhooks as webhook_store
from cortex_workers.store.budget import Alert, CallToReserve, ScopeLimit
from cortex_workers.store.settlement import Settlement
from cortex_workers.turns.guards.alerts import report_alerts
from cortex_workers.vocabulary import BudgetScope

LIMIT = 1_000_000
CALL = 50_000  # 20 calls: exactly the limit; the 16th crosses 80 %


def test_twenty_concurrent_settles_crossing_eighty_percent_alert_exactly_once(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    tenant_id, _ = new_tenant({"daily_usd_limit_micros": LIMIT})
    day = day_window(datetime.now(UTC), "UTC")
    held = []
    for _ in range(20):
        session_id, turn_id, step_id = held_step(tenant_id)
        call = CallToReserve(
            step_id=step_id,
            attempt=1,
            turn_id=turn_id,
            tenant_id=tenant_id,
            session_id=session_id,
            user=None,
            provider="openai",
            model="gpt-budget-test",
            amount_micros=CALL,
            tokens=100,
            call_no=0,
            scopes=(
                ScopeLimit(BudgetScope.GLOBAL, "global", day, None),
                ScopeLimit(BudgetScope.TENANT, f"tenant:{tenant_id}", day, LIMIT),
                ScopeLimit(BudgetScope.SESSION, f"session:{session_id}", forever(), None),
            ),
        )
        reservation = budget_store.reserve(get_runtime().engine, call)
        assert isinstance(reservation, budget_store.Reservation)
        held.append(reservation)
    with get_runtime().engine.begin() as conn:  # the tenant's webhook hears of the alert
        webhook_store.create(
            conn,
            tenant_id=tenant_id,
            url="http://127.0.0.1:9/",
            events=["budget.alert"],
            secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
    start = threading.Barrier(len(held))
    fired: list[Alert] = []

    def settle(reservation: budget_store.Reservation) -> None:
        start.wait()
        fired.extend(
            settlement.settle(
                get_runtime().engine,
                reservation.id,
                Settlement(CALL, 10, 10),
                alert_at_pct=80,
            )
        )

    threads = [threading.Thread(target=settle, args=(r,)) for r in held]
    before = metrics.BUDGET_ALERTS.labels("tenant")._value.get()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    with caplog.at_level(logging.WARNING, logger="cortex_workers.turns.guards.alerts"):
        report_alerts(fired, 80)

    assert [a.key for a in fired] == [f"tenant:{tenant_id}"]
    assert fired[0].spent >= 800_000
    assert metrics.BUDGET_ALERTS.labels("tenant")._value.get() - before == 1
    assert [r.message for r in caplog.records if "budget alert" in r.message] == [
        f"budget alert: tenant:{tenant_id} spent ${fired[0].spent / 1e6:.6f} of its $1.00 "
        "daily limit (alert at 80%)"
    ]
    with get_runtime().engine.connect() as conn:
        row = conn.execute(
            text("SELECT spent, reserved, alerted_at FROM budget_counters WHERE scope = :k"),
            {"k": f"tenant:{tenant_id}"},
        ).one()
    assert (row.spent, row.reserved) == (LIMIT, 0)
    assert row.alerted_at is not None
    with get_runtime().engine.connect() as conn:
        events = (
            conn.execute(
                text(
                    "SELECT data FROM webhook_events WHERE tenant_id = :t AND type = 'budget.alert'"
                ),
                {"t": tenant_id},
            )
            .scalars()
            .all()
        )
    assert len(events) == 1, events
    assert events[0]["tenant_id"] == str(tenant_id) and events[0]["scope"] == "tenant"
    assert events[0]["limit_usd"] == 1.0 and events[0]["spent_usd"] >= 0.8
