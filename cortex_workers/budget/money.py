"""Money as integer micro-dollars: what budgets store, reserve and settle, with no rounding drift.

A price of `P` USD per million tokens is `P` micro-dollars per token, so a call's cost in
micro-dollars is `tokens × price`; it is rounded up, so that a reservation is never below what
the same tokens cost.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

MICROS_PER_USD = 1_000_000


def usd_to_micros(usd: float | Decimal) -> int:
    """`usd` dollars in micro-dollars, to the nearest micro-dollar."""
    return int((Decimal(str(usd)) * MICROS_PER_USD).to_integral_value(rounding=ROUND_HALF_UP))


def micros_to_usd(micros: int) -> float:
    """Micro-dollars as dollars (exact to the sixth decimal)."""
    return micros / MICROS_PER_USD


def token_cost_micros(tokens: int, usd_per_mtok: float) -> int:
    """What `tokens` cost at `usd_per_mtok` dollars per million tokens, rounded up."""
    if tokens <= 0 or usd_per_mtok <= 0:
        return 0
    exact = Decimal(tokens) * Decimal(str(usd_per_mtok))
    return int(exact.to_integral_value(rounding="ROUND_CEILING"))


def call_cost_micros(
    input_tokens: int, output_tokens: int, *, input_per_mtok: float, output_per_mtok: float
) -> int:
    """A call's cost: its input and output tokens at their prices (each rounded up)."""
    return token_cost_micros(input_tokens, input_per_mtok) + token_cost_micros(
        output_tokens, output_per_mtok
    )


def pct_of(limit: int, pct: float) -> int:
    """`pct` per cent of `limit` micro-dollars (or tokens), rounded up: the alert threshold."""
    return math.ceil(limit * pct / 100)
