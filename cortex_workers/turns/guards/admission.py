"""Before a turn is stored: is there budget left for it, and may its end user start another?

A daily budget is exhausted for a new turn when not even its smallest first call fits what is
left (limit minus spent: calls in flight may still settle below what they hold); then the turn
is refused (402) before anything is stored. A session over its token cap is refused (409), and
an end user over `per_user_hourly_limit` (429, with Retry-After).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime

from ...budget import BudgetExhausted, CallEstimate, estimate_call, session_cap_error
from ...budget.policy import UserRateLimited
from ...errors import NotFound
from ...messages import Message, ModelRequest
from ...providers.limits import Limit, RateLimiter
from ...runtime import Runtime
from ...store import repo
from ...store import usage as usage_store
from ...store.db import autocommit, autocommit_connection
from ...store.models import Session, Turn
from ...store.usage import Counter
from ...vocabulary import BudgetScope, RateLimitKind
from ..spend import limits_for, scope_limits

HOUR_S = 3600.0


def first_call_estimate(
    rt: Runtime, session: Session, messages: tuple[Message, ...]
) -> CallEstimate:
    """The maximum and expected cost of sending `messages` on the session's own model."""
    provider, model = rt.providers.resolve(session.provider, session.model)
    price = rt.providers.price(provider, model)
    config = rt.providers.configs.get(provider)
    try:
        tools = tuple(rt.tools.specs(session.tools))
    except ValueError:  # a tool gone since: the step will say so; estimate without tools
        tools = ()
    return estimate_call(
        ModelRequest(model=model, messages=messages, tools=tools),
        input_per_mtok=price.input_per_mtok,
        output_per_mtok=price.output_per_mtok,
        max_tokens=config.max_tokens if config is not None else 4096,
    )


@dataclass(frozen=True, slots=True)
class ScopeState:
    """Where one scope stands today."""

    scope: BudgetScope
    limit: int | None
    counter: Counter
    resets_at: datetime | None

    @property
    def remaining(self) -> int | None:
        if self.limit is None:
            return None
        return max(self.limit - self.counter.spent - self.counter.reserved, 0)


def money_states(rt: Runtime, tenant_id: uuid.UUID, session_id: uuid.UUID) -> list[ScopeState]:
    """The global and the tenant's daily budget, then the session's tokens (one read)."""
    limits = limits_for(rt, tenant_id)
    money, session = scope_limits(rt, tenant_id, session_id, limits)
    scopes = (*money, session)
    with autocommit_connection(rt.engine) as conn:
        counters = usage_store.counters(conn, [(s.key, s.window.start) for s in scopes])
    return [
        ScopeState(s.scope, s.limit, counters.get(s.key, Counter()), s.window.resets_at)
        for s in scopes
    ]


def check_budget(rt: Runtime, session: Session, content: str, states: list[ScopeState]) -> None:
    """`BudgetExhausted` (402) or a `session_token_cap` conflict (409) for a new turn."""
    prompt = (
        session.system_prompt if session.system_prompt is not None else rt.settings.system_prompt
    )
    smallest = (Message(role="system", content=prompt), Message(role="user", content=content))
    estimate = first_call_estimate(rt, session, smallest)
    for state in states:
        if state.limit is None:
            continue
        if state.scope is BudgetScope.SESSION:
            needed = estimate.input_tokens + estimate.max_output_tokens
            if state.counter.spent + needed > state.limit:
                raise session_cap_error(cap=state.limit, used=state.counter.spent)
        elif state.counter.spent + estimate.cost_micros_max > state.limit:
            raise BudgetExhausted(
                scope=state.scope,
                limit=state.limit,
                spent=state.counter.spent,
                resets_at=state.resets_at,
            )


def take_user_turn(rt: Runtime, tenant_id: uuid.UUID, user: str | None) -> None:
    """Count one turn of the end user in the last hour; `UserRateLimited` (429) over it."""
    if user is None:
        return
    per_hour = limits_for(rt, tenant_id).per_user_hourly
    if not per_hour:
        return
    limiter = RateLimiter(rt.redis, window_s=HOUR_S)
    scope = f"tenant:{tenant_id}:user:{user}:turns"
    grant = limiter.acquire([Limit(scope, RateLimitKind.RPM, per_hour, 1)])
    if not grant.granted:
        raise UserRateLimited(
            user=user, limit=per_hour, retry_after_s=max(1, math.ceil(grant.wait_s))
        )


def admit_turn(
    rt: Runtime,
    *,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    content: str,
    user: str | None,
) -> None:
    """Refuse a new turn the budget cannot take, before anything is stored: 402, 409 or 429
    (see the module). With no limit that applies it reads nothing (the tenant's limits are
    cached per process). Not for the replay of an Idempotency-Key (`replayed`), which creates
    nothing and is not refused."""
    limits = limits_for(rt, tenant_id)
    budgeted = any(
        x is not None
        for x in (limits.global_daily_micros, limits.tenant_daily_micros, limits.session_token_cap)
    )
    if not budgeted and (not limits.per_user_hourly or user is not None):
        take_user_turn(rt, tenant_id, user)
        return
    money, cap = scope_limits(rt, tenant_id, session_id, limits)
    scopes = (*money, cap)
    with autocommit(rt.db) as db:  # one read: the session and its counters
        session, counters = usage_store.session_and_counters(
            db, session_id, tenant_id, [(s.key, s.window.start) for s in scopes]
        )
    if session is None:
        raise NotFound(f"session {session_id} not found")
    if budgeted:
        states = [
            ScopeState(s.scope, s.limit, counters.get(s.key, Counter()), s.window.resets_at)
            for s in scopes
        ]
        check_budget(rt, session, content, states)
    take_user_turn(rt, tenant_id, user if user is not None else session.user)


def replayed(rt: Runtime, tenant_id: uuid.UUID, idempotency_key: str | None) -> Turn | None:
    """The turn an Idempotency-Key already names (one read; none without a key)."""
    if idempotency_key is None:
        return None
    with autocommit(rt.db) as db:
        return repo.turn_by_idempotency_key(db, tenant_id, idempotency_key)
