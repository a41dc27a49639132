"""Budgets (docs/cost-and-privacy.md): integer micro-dollars, the maximum and expected cost of
a model call, windows in `budget_timezone`, and the limits in force.

Pure values and functions; the SQL is in `store.budget`, and `turns.spend` reserves and
settles around each model call.
"""

from .estimate import CallEstimate, estimate_call
from .money import call_cost_micros, micros_to_usd, pct_of, usd_to_micros
from .policy import (
    BUDGET_EXHAUSTED,
    SESSION_TOKEN_CAP,
    USER_RATE_LIMITED,
    BudgetExhausted,
    Limits,
    UserRateLimited,
    resolve_limits,
    session_cap_error,
)
from .windows import NO_WINDOW, Window, day_window, forever

__all__ = [
    "BUDGET_EXHAUSTED",
    "NO_WINDOW",
    "SESSION_TOKEN_CAP",
    "USER_RATE_LIMITED",
    "BudgetExhausted",
    "CallEstimate",
    "Limits",
    "UserRateLimited",
    "Window",
    "call_cost_micros",
    "day_window",
    "estimate_call",
    "forever",
    "micros_to_usd",
    "pct_of",
    "resolve_limits",
    "session_cap_error",
    "usd_to_micros",
]
