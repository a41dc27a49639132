"""`[llm.budget]`: spending limits (docs/cost-and-privacy.md), part of `settings.Settings`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _known_timezone(value: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {value!r} (use an IANA name like Europe/Paris)"
        ) from None
    return value


class BudgetSettings(BaseModel):
    """`[llm.budget]`: spending limits (docs/cost-and-privacy.md); tenants may override them."""

    model_config = ConfigDict(extra="forbid")
    daily_usd_limit: float | None = Field(default=None, ge=0)
    """All tenants together, per day in `budget_timezone` (a tenant may get its own limit too)."""
    per_user_hourly_limit: int | None = Field(default=None, ge=1)
    """Turns one end user (`user`) may start in any hour."""
    per_session_token_cap: int | None = Field(default=None, ge=1)
    """Input plus output tokens a session may use in all."""
    alert_at_pct: float = Field(default=80.0, gt=0, le=100)
    on_exhausted: Literal["stop", "local"] = "stop"
    """A running turn that cannot reserve: fail it, or go on with `local_provider`."""
    local_provider: str = "ollama"
    budget_timezone: Annotated[str, AfterValidator(_known_timezone)] = "UTC"
