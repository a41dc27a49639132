"""The caller's budget today, and its usage over a period."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ...budget import day_window, micros_to_usd
from ...errors import InvalidRequest
from ...store import usage as usage_store
from ...turns.guards.admission import money_states
from ...turns.spend import limits_for
from ...vocabulary import BudgetScope
from ..deps import RuntimeDep, TenantDep

router = APIRouter(prefix="/v1", tags=["budget"])
NO_SESSION = uuid.UUID(int=0)
"""The budget view reads no session's counter: this one is never used."""


class ScopeBudgetOut(BaseModel):
    scope: BudgetScope = Field(description="`global` (every tenant together) or `tenant`.")
    limit_usd: float | None = Field(description="Null: no daily limit, spend is only counted.")
    spent_usd: float
    reserved_usd: float = Field(description="Held by model calls in flight.")
    remaining_usd: float | None
    resets_at: datetime | None
    alerted_at: datetime | None = Field(description="When `alert_at_pct` was crossed today.")


class BudgetOut(BaseModel):
    timezone: str
    day_start: datetime
    resets_at: datetime | None
    alert_at_pct: float
    on_exhausted: Literal["stop", "local"]
    per_user_hourly_limit: int | None
    per_session_token_cap: int | None
    scopes: list[ScopeBudgetOut]


@router.get("/budget", response_model=BudgetOut)
def get_budget(rt: RuntimeDep, tenant_id: TenantDep) -> BudgetOut:
    """The caller's tenant today: limits, spent, reserved, remaining, `resets_at`, `alerted_at`."""
    config = rt.settings.llm_budget
    limits = limits_for(rt, tenant_id)
    states = money_states(rt, tenant_id, NO_SESSION)
    day = day_window(datetime.now(UTC), config.budget_timezone)
    scopes = [
        ScopeBudgetOut(
            scope=s.scope,
            limit_usd=micros_to_usd(s.limit) if s.limit is not None else None,
            spent_usd=micros_to_usd(s.counter.spent),
            reserved_usd=micros_to_usd(s.counter.reserved),
            remaining_usd=micros_to_usd(s.remaining) if s.remaining is not None else None,
            resets_at=s.resets_at,
            alerted_at=s.counter.alerted_at,
        )
        for s in states
        if s.scope is not BudgetScope.SESSION
    ]
    return BudgetOut(
        timezone=config.budget_timezone,
        day_start=day.start,
        resets_at=day.resets_at,
        alert_at_pct=config.alert_at_pct,
        on_exhausted=config.on_exhausted,
        per_user_hourly_limit=limits.per_user_hourly,
        per_session_token_cap=limits.session_token_cap,
        scopes=scopes,
    )


class UsageGroupOut(BaseModel):
    key: str = Field(description="The day (YYYY-MM-DD), provider:model, user or session id.")
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class UsageOut(BaseModel):
    from_: datetime = Field(alias="from", serialization_alias="from")
    to: datetime
    group_by: usage_store.GroupBy
    groups: list[UsageGroupOut]
    total: UsageGroupOut


@router.get("/usage", response_model=UsageOut, response_model_by_alias=True)
def get_usage(
    rt: RuntimeDep,
    tenant_id: TenantDep,
    from_: Annotated[datetime | None, Query(alias="from")] = None,
    to: datetime | None = None,
    group_by: usage_store.GroupBy = "day",
) -> UsageOut:
    """Model calls of the caller's tenant made in [`from`, `to`) (default: today so far):
    calls, input and output tokens and cost, grouped by day, model, user or session."""
    tz = rt.settings.llm_budget.budget_timezone
    now = datetime.now(UTC)
    start = _aware(from_) if from_ is not None else day_window(now, tz).start
    end = _aware(to) if to is not None else now + timedelta(seconds=1)
    if end <= start:
        raise InvalidRequest("`to` must be after `from`", code="invalid_period")
    with rt.engine.connect() as conn:
        rows = usage_store.usage(
            conn, tenant_id, start=start, end=end, group_by=group_by, timezone=tz
        )
    groups = [
        UsageGroupOut(
            key=r.key,
            calls=r.calls,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            cost_usd=micros_to_usd(r.cost_micros),
        )
        for r in rows
    ]
    total = UsageGroupOut(
        key="total",
        calls=sum(g.calls for g in groups),
        input_tokens=sum(g.input_tokens for g in groups),
        output_tokens=sum(g.output_tokens for g in groups),
        cost_usd=micros_to_usd(sum(r.cost_micros for r in rows)),
    )
    return UsageOut.model_validate(
        {"from": start, "to": end, "group_by": group_by, "groups": groups, "total": total}
    )


def _aware(moment: datetime) -> datetime:
    """A time without a zone is taken as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
