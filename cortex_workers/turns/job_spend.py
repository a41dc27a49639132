"""Spend of LLM-function jobs: each model call of a job reserves its maximum cost in the global
and the tenant's daily budgets before it is made (never shrunk to fit), and is settled to its
real cost after it (`turns.spend.settling`), as a turn's step is; the reconciler settles the
call of a dead worker (the job's lease ran out) at the reserved amount. A call that cannot
reserve ends the job `failed` with `budget_exhausted`; a job or batch whose smallest first call
does not fit what is left is refused (402) before anything is stored. See docs/jobs.md."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from ..budget import BudgetExhausted, CallEstimate, day_window, estimate_call
from ..errors import TerminalError
from ..messages import ModelRequest
from ..providers.registry import Route
from ..runtime import Runtime
from ..store import usage as usage_store
from ..store.budget import Refusal, Reservation, ScopeLimit
from ..store.job_budget import JobCallToReserve, reserve_job_call
from ..vocabulary import BudgetScope
from .spend import limits_for


def estimate(rt: Runtime, route: Route, request: ModelRequest) -> CallEstimate:
    """The maximum (and expected) cost of sending `request` on `route`."""
    price = rt.providers.price(route.provider, route.model)
    config = rt.providers.configs.get(route.provider)
    return estimate_call(
        request,
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
        max_tokens=config.max_tokens if config is not None else 4096,
    )


def daily_scopes(rt: Runtime, tenant_id: uuid.UUID) -> tuple[ScopeLimit, ScopeLimit]:
    """The global and the tenant's daily budget today, with the limits in force."""
    limits = limits_for(rt, tenant_id)
    day = day_window(datetime.now(UTC), rt.settings.llm_budget.budget_timezone)
    return (
        ScopeLimit(BudgetScope.GLOBAL, "global", day, limits.global_daily_micros),
        ScopeLimit(BudgetScope.TENANT, f"tenant:{tenant_id}", day, limits.tenant_daily_micros),
    )


def reserve_call(
    rt: Runtime,
    job: tuple[uuid.UUID, uuid.UUID, int, int],
    route: Route,
    request: ModelRequest,
) -> Reservation:
    """Hold the maximum cost of call `n` of run `run`; `job` is (job, tenant, run, n).
    Raises a `TerminalError` with code `budget_exhausted` when a daily budget cannot take it."""
    job_id, tenant_id, run, n = job
    cost = estimate(rt, route, request)
    held = reserve_job_call(
        rt.engine,
        JobCallToReserve(
            job_id=job_id,
            run=run,
            call_no=n,
            tenant_id=tenant_id,
            provider=route.provider,
            model=route.model,
            amount_micros=cost.cost_micros_max,
            tokens=cost.input_tokens + cost.max_output_tokens,
            money=daily_scopes(rt, tenant_id),
        ),
    )
    if isinstance(held, Refusal):
        error = BudgetExhausted(
            scope=held.scope, limit=held.limit, spent=held.spent, resets_at=held.resets_at
        )
        raise TerminalError(error.message, code=error.code, details=error.details)
    return held


def check_job_budget(rt: Runtime, tenant_id: uuid.UUID, smallest: CallEstimate) -> None:
    """`BudgetExhausted` (402) when the smallest first call of what is submitted does not fit
    what is left of a daily budget (limit minus spent: calls in flight may settle lower)."""
    scopes = daily_scopes(rt, tenant_id)
    with rt.engine.connect() as conn:
        for scope in scopes:
            if scope.limit is None:
                continue
            spent = usage_store.counter(conn, scope.key, scope.window.start).spent
            if spent + smallest.cost_micros_max > scope.limit:
                raise BudgetExhausted(
                    scope=scope.scope,
                    limit=scope.limit,
                    spent=spent,
                    resets_at=scope.window.resets_at,
                )
