"""The limits in force for a tenant and a session, and the refusals they produce."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..budget_settings import BudgetSettings
from ..errors import ConflictError, CortexError
from ..vocabulary import BudgetScope
from .money import micros_to_usd, usd_to_micros

BUDGET_EXHAUSTED = "budget_exhausted"
SESSION_TOKEN_CAP = "session_token_cap"
USER_RATE_LIMITED = "user_rate_limited"


@dataclass(frozen=True, slots=True)
class Limits:
    """Resolved limits: the configuration, with the tenant's overrides on top."""

    global_daily_micros: int | None
    tenant_daily_micros: int | None
    per_user_hourly: int | None
    session_token_cap: int | None


def resolve_limits(
    settings: BudgetSettings,
    *,
    tenant_daily_micros: int | None = None,
    per_user_hourly: int | None = None,
    session_token_cap: int | None = None,
) -> Limits:
    """The configured `[llm.budget]` limits; a tenant's own values replace the per-user and
    per-session ones, and add a daily limit of its own (the global one still applies)."""
    configured_daily = settings.daily_usd_limit
    return Limits(
        global_daily_micros=usd_to_micros(configured_daily)
        if configured_daily is not None
        else None,
        tenant_daily_micros=tenant_daily_micros,
        per_user_hourly=per_user_hourly
        if per_user_hourly is not None
        else settings.per_user_hourly_limit,
        session_token_cap=session_token_cap
        if session_token_cap is not None
        else settings.per_session_token_cap,
    )


class BudgetExhausted(CortexError):
    """A daily budget cannot take the call (answered 402 before a turn is stored)."""

    code = BUDGET_EXHAUSTED

    def __init__(
        self, *, scope: BudgetScope, limit: int, spent: int, resets_at: datetime | None
    ) -> None:
        limit_usd, spent_usd = micros_to_usd(limit), micros_to_usd(spent)
        when = f"; it resets at {resets_at.isoformat()}" if resets_at is not None else ""
        super().__init__(
            f"the {scope} budget of ${limit_usd:.2f} a day is spent "
            f"(${spent_usd:.6f} so far){when}",
            details={
                "scope": str(scope),
                "limit_usd": limit_usd,
                "spent_usd": spent_usd,
                "resets_at": resets_at.isoformat() if resets_at is not None else None,
            },
        )


def session_cap_error(*, cap: int, used: int) -> ConflictError:
    """A session over its token cap (answered 409)."""
    return ConflictError(
        f"this session used {used} of its {cap} tokens; start a new session",
        code=SESSION_TOKEN_CAP,
        details={"cap_tokens": cap, "used_tokens": used},
    )


class UserRateLimited(CortexError):
    """An end user started `limit` turns in the last hour (answered 429 with Retry-After)."""

    code = USER_RATE_LIMITED

    def __init__(self, *, user: str, limit: int, retry_after_s: int) -> None:
        super().__init__(
            f"this end user may start {limit} turns an hour; retry in {retry_after_s} s",
            details={"user": user, "limit_per_hour": limit, "retry_after_s": retry_after_s},
        )
        self.retry_after_s = retry_after_s
