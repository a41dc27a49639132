"""The built-in tools: `current_time` and `calculate`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cortex_workers.tools.calculator import evaluate
from cortex_workers.tools.registry import Tool, ToolRegistry

CURRENT_TIME_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

CALCULATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["expression"],
    "additionalProperties": False,
}


def current_time() -> str:
    """The current UTC time in ISO 8601, e.g. ``2026-11-22T18:00:00.123456+00:00``."""
    return datetime.now(UTC).isoformat()


def calculate(expression: str) -> dict[str, int | float]:
    """Evaluate an arithmetic expression; ValueError says what is wrong with it."""
    return {"result": evaluate(expression)}


def register_builtins(registry: ToolRegistry) -> None:
    """Register the built-in tools into `registry`."""
    registry.register(
        Tool(
            name="current_time",
            description=(
                "Get the current date and time in UTC as an ISO 8601 string, "
                "e.g. 2026-11-22T18:00:00.123456+00:00. Takes no arguments."
            ),
            parameters=CURRENT_TIME_PARAMETERS,
            fn=current_time,
        )
    )
    registry.register(
        Tool(
            name="calculate",
            description=(
                'Evaluate an arithmetic expression exactly and return {"result": number}. '
                "Supports numbers, + - * / // % **, parentheses, the constants pi, e, tau and "
                "the functions sqrt, abs, round, floor, ceil, log, log10, exp, sin, cos, tan, "
                'min, max (radians for trigonometry). Example: "sqrt(2) * (3 + 4) ** 2".'
            ),
            parameters=CALCULATE_PARAMETERS,
            fn=calculate,
        )
    )
