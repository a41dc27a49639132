"""Spend around a model call: reserve its maximum cost before it, settle its real cost after.

`admit` holds the call's maximum cost (`budget.estimate_call`) in the global and the tenant's
daily budgets and its tokens against the session's cap, all or nothing (`store.budget`). A call
that does not fit what is left (limit minus spent minus what calls in flight hold) ends the
turn `failed` with `budget_exhausted` (a visible `error` event), or, with
`on_exhausted = "local"`, goes on with the configured local provider and a warning on the turn.
`settling` settles the call at its real cost, or at the reserved amount when it did not finish
(the provider may have billed it); the reconciler settles those of dead workers the same way.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..budget import (
    BUDGET_EXHAUSTED,
    Limits,
    call_cost_micros,
    day_window,
    estimate_call,
    forever,
    resolve_limits,
)
from ..budget.policy import BudgetExhausted
from ..messages import Completion, ModelRequest
from ..observability.metrics import count_budget_alert
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import budget as budget_store
from ..store import repo, tenant_admin
from ..store.budget import Alert, CallToReserve, Refusal, Reservation, ScopeLimit, Settlement
from ..store.db import autocommit, transaction
from ..store.steps import Claim
from ..vocabulary import BudgetScope, StepKind, TimelineKind
from .context import ModelContext
from .lifecycle import announce, fail_turn
from .observe import StepOutcome, count_step
from .steps import NextStep
from .timeline import note

log = logging.getLogger(__name__)

LIMITS_TTL_S = 2.0
"""A tenant's overrides are read again after this long (an operator's change applies soon)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """The call may go ahead on `route` with `request`, holding `held`."""

    route: Route
    request: ModelRequest
    held: Reservation
    step: tuple[uuid.UUID, int] | None = None
    """The turn and step number whose timeline records the settlement (None: not recorded)."""


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


def _reserve(
    rt: Runtime,
    claim: Claim,
    owner: tuple[uuid.UUID, uuid.UUID],
    route: Route,
    request: ModelRequest,
    *,
    call_no: int = 0,
) -> Reservation | Refusal:
    """`owner`: the call's tenant and session."""
    tenant_id, session_id = owner
    price = rt.providers.price(route.provider, route.model)
    config = rt.providers.configs.get(route.provider)
    estimate = estimate_call(
        request,
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
        max_tokens=config.max_tokens if config is not None else 4096,
    )
    money, session = scope_limits(rt, tenant_id, session_id, limits_for(rt, tenant_id))
    call = CallToReserve(
        step_id=claim.step_id,
        attempt=claim.attempt,
        turn_id=claim.turn_id,
        tenant_id=tenant_id,
        session_id=session_id,
        provider=route.provider,
        model=route.model,
        amount_micros=estimate.cost_micros_max,
        tokens=estimate.input_tokens + estimate.max_output_tokens,
        call_no=call_no,
        money=money,
        session=session,
    )
    held = budget_store.reserve(rt.engine, call)
    _note_reserve(rt, claim, route, held)
    return held


def _note_reserve(rt: Runtime, claim: Claim, route: Route, held: Reservation | Refusal) -> None:
    """The timeline's `budget` event of a reservation: reserved, or refused."""
    where = {"provider": route.provider, "model": route.model, "attempt": claim.attempt}
    if isinstance(held, Reservation):
        data: dict[str, object] = {
            "action": "reserved",
            "amount_usd": held.amount_micros / 1e6,
            "tokens": held.tokens,
        }
    else:
        data = {
            "action": "refused",
            "scope": str(held.scope),
            "limit": held.limit,
            "spent": held.spent,
            "asked": held.asked,
        }
    note(rt, claim.turn_id, TimelineKind.BUDGET, {**data, **where}, step=claim.step_no)


def admit(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, request: ModelRequest
) -> Admitted | list[NextStep]:
    """Reserve the call, or what to publish after the turn ended for want of budget."""
    held = _reserve(rt, claim, (ctx.tenant_id, ctx.session_id), route, request)
    if isinstance(held, Reservation):
        return Admitted(route, request, held, (claim.turn_id, claim.step_no))
    budget = rt.settings.llm_budget
    local = budget.local_provider
    if (
        budget.on_exhausted == "local"
        and held.scope is not BudgetScope.SESSION
        and route.provider != local
        and not rt.providers.unavailable(local)
    ):
        local_route = Route(local, rt.providers.default_model(local), route.provider)
        _warn_local(rt, claim, held, local)
        return admit(rt, claim, ctx, local_route, replace(request, model=local_route.model))
    return _exhausted(rt, claim, held)


def reserve_more(
    rt: Runtime, claim: Claim, ctx: ModelContext, route: Route, request: ModelRequest
) -> Admitted | None:
    """Reserve a second call of the same attempt (frugal's escalation); None when the budget
    cannot take it (no waiting, no local provider: the first answer stands)."""
    held = _reserve(rt, claim, (ctx.tenant_id, ctx.session_id), route, request, call_no=1)
    if not isinstance(held, Reservation):
        return None
    return Admitted(route, request, held, (claim.turn_id, claim.step_no))


def reserve_summary(
    rt: Runtime,
    claim: Claim,
    owner: tuple[uuid.UUID, uuid.UUID],
    route: Route,
    request: ModelRequest,
) -> Admitted | None:
    """Reserve a summarize step's call (tenant and session in `owner`); None when the budget
    cannot take it (the summary waits for a later turn's)."""
    held = _reserve(rt, claim, owner, route, request)
    return Admitted(route, request, held) if isinstance(held, Reservation) else None


def _warn_local(rt: Runtime, claim: Claim, refusal: Refusal, local: str) -> None:
    message = (
        f"the {refusal.scope} budget cannot take this call; it went to the local provider "
        f"{local!r} instead"
    )
    log.warning("turn %s: %s", claim.turn_id, message)
    with transaction(rt.db) as db:
        repo.add_turn_warnings(
            db,
            claim.turn_id,
            [{"code": BUDGET_EXHAUSTED, "message": message, "step": claim.step_no}],
        )


def _exhausted(rt: Runtime, claim: Claim, refusal: Refusal) -> list[NextStep]:
    """The turn ends `failed` with `budget_exhausted`, visibly."""
    if refusal.scope is BudgetScope.SESSION:
        code = "session_token_cap"
        message = (
            f"this session reached its cap of {refusal.limit} tokens "
            f"({refusal.spent} used); start a new session"
        )
    else:
        error = BudgetExhausted(
            scope=refusal.scope,
            limit=refusal.limit,
            spent=refusal.spent,
            resets_at=refusal.resets_at,
        )
        code, message = BUDGET_EXHAUSTED, error.message
    count_step(StepKind.MODEL, StepOutcome.FAILED)
    ended, publish = fail_turn(
        rt, turn_id=claim.turn_id, code=code, message=message, failed_step_id=claim.step_id
    )
    announce(rt, ended)
    return publish


@dataclass
class Bill:
    """Filled by the model step once the call answered; unfilled means it did not finish."""

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
        settled = settle(rt, admitted.held, bill)
        if admitted.step is not None:
            _note_settled(rt, admitted, settled)


def _note_settled(rt: Runtime, admitted: Admitted, settled: Settlement) -> None:
    assert admitted.step is not None
    turn_id, step_no = admitted.step
    cost = settled.cost_micros if settled.cost_micros is not None else admitted.held.amount_micros
    data = {"action": "settled", "by": settled.by, "cost_usd": cost / 1e6}
    note(rt, turn_id, TimelineKind.BUDGET, data, step=step_no)


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
        if cost > held.amount_micros:
            log.warning(
                "a call cost %d micro-dollars, more than the %d reserved (the provider counted "
                "more tokens than the request's size bounds)",
                cost,
                held.amount_micros,
            )
        outcome = Settlement(cost, done.input_tokens, done.output_tokens)
    alerts = budget_store.settle(
        rt.engine,
        held.id,
        outcome,
        alert_at_pct=rt.settings.llm_budget.alert_at_pct,
        counted_after=held.counted_after,
    )
    report_alerts(alerts, rt.settings.llm_budget.alert_at_pct)
    return outcome


def report_alerts(alerts: list[Alert], pct: float) -> None:
    """The WARNING line and the metric of each alert that fired (once per scope and window)."""
    for alert in alerts:
        scope = alert.key.split(":", 1)[0]
        log.warning(
            "budget alert: %s spent $%.6f of its $%.2f daily limit (alert at %g%%)",
            alert.key,
            alert.spent / 1e6,
            alert.limit / 1e6,
            pct,
        )
        count_budget_alert(scope)
