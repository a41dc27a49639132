"""Spend around a provider call that is not a model step's (a summary's, a job's): reserve its
maximum cost before it, settle its real cost after it, each by a statement of its own. A model
step's call reserves where a limit applies and settles in the statement that ends the step
(`turns.guards.budget`).

`settling` settles the call at its real cost, or at the reserved amount when it did not finish
(the provider may have billed it); the reconciler settles those of dead workers the same way.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from ..budget import Limits, call_cost_micros, day_window, forever, resolve_limits
from ..messages import Completion, ModelRequest
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import budget as budget_store
from ..store import settlement, tenant_admin
from ..store.budget import CallToReserve, Reservation, ScopeLimit
from ..store.db import autocommit
from ..store.settlement import Settlement
from ..store.steps import Claim
from ..vocabulary import BudgetScope
from .guards.alerts import report_alerts
from .guards.budget import estimate

LIMITS_TTL_S = 2.0
"""A tenant's overrides are read again after this long (an operator's change applies soon)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """The call may go ahead on `route` with `request`, holding `held`."""

    route: Route
    request: ModelRequest
    held: Reservation


_limits_cache: dict[uuid.UUID, tuple[Limits, float]] = {}
_cache_lock = threading.Lock()


def limits_for(rt: Runtime, tenant_id: uuid.UUID) -> Limits:
    """The limits in force for the tenant (its overrides read at most every ~2 s)."""
    now = time.monotonic()
    with _cache_lock:
        cached = _limits_cache.get(tenant_id)
    if cached is not None and cached[1] > now:
        return cached[0]
    with autocommit(rt.db) as db:
        own = tenant_admin.overrides_of(db, tenant_id)
    limits = resolve_limits(
        rt.settings.llm_budget,
        tenant_daily_micros=own.daily_usd_limit_micros,
        per_user_hourly=own.per_user_hourly_limit,
        session_token_cap=own.session_token_cap,
    )
    with _cache_lock:
        _limits_cache[tenant_id] = (limits, now + LIMITS_TTL_S)
    return limits


def scope_limits(
    rt: Runtime, tenant_id: uuid.UUID, session_id: uuid.UUID, limits: Limits
) -> tuple[tuple[ScopeLimit, ScopeLimit], ScopeLimit]:
    """The counters a call of this tenant's session goes through, today."""
    day = day_window(datetime.now(UTC), rt.settings.llm_budget.budget_timezone)
    money = (
        ScopeLimit(BudgetScope.GLOBAL, "global", day, limits.global_daily_micros),
        ScopeLimit(BudgetScope.TENANT, f"tenant:{tenant_id}", day, limits.tenant_daily_micros),
    )
    session = ScopeLimit(
        BudgetScope.SESSION, f"session:{session_id}", forever(), limits.session_token_cap
    )
    return money, session


def reserve_summary(
    rt: Runtime,
    claim: Claim,
    owner: tuple[uuid.UUID, uuid.UUID],
    route: Route,
    request: ModelRequest,
) -> Admitted | None:
    """Reserve a summarize step's call (tenant and session in `owner`); None when the budget
    cannot take it (the summary waits for a later turn's)."""
    tenant_id, session_id = owner
    cost = estimate(rt, route, request)
    money, session = scope_limits(rt, tenant_id, session_id, limits_for(rt, tenant_id))
    held = budget_store.reserve(
        rt.engine,
        CallToReserve(
            step_id=claim.step_id,
            attempt=claim.attempt,
            turn_id=claim.turn_id,
            tenant_id=tenant_id,
            session_id=session_id,
            user=None,
            provider=route.provider,
            model=route.model,
            amount_micros=cost.cost_micros_max,
            tokens=cost.input_tokens + cost.max_output_tokens,
            call_no=0,
            scopes=(*money, session),
        ),
    )
    return Admitted(route, request, held) if isinstance(held, Reservation) else None


@dataclass
class Bill:
    """Filled by the caller once the call answered; unfilled means it did not finish."""

    route: Route
    completion: Completion | None = None

    def paid(self, completion: Completion, route: Route | None = None) -> None:
        """The call answered with `completion`, on `route` when not the admitted one."""
        self.completion = completion
        if route is not None:
            self.route = route


@contextmanager
def settling(rt: Runtime, admitted: Admitted) -> Iterator[Bill]:
    """Settle the call when the block ends: at its real cost when `bill.paid(completion)`
    was called, else (an error, an interruption) at the reserved amount."""
    bill = Bill(admitted.route)
    try:
        yield bill
    finally:
        settle(rt, admitted.held, bill)


def settle(rt: Runtime, held: Reservation, bill: Bill) -> Settlement:
    outcome = Settlement(None, by="failure")
    if bill.completion is not None:
        price = rt.providers.price(bill.route.provider, bill.route.model)
        done = bill.completion
        cost = call_cost_micros(
            done.input_tokens,
            done.output_tokens,
            input_per_mtok=price.input_per_mtok,
            output_per_mtok=price.output_per_mtok,
        )
        outcome = Settlement(cost, done.input_tokens, done.output_tokens)
    pct = rt.settings.llm_budget.alert_at_pct
    report_alerts(settlement.settle(rt.engine, held.id, outcome, alert_at_pct=pct), pct)
    return outcome


__all__ = ["Admitted", "Bill", "limits_for", "report_alerts", "reserve_summary", "scope_limits"]
