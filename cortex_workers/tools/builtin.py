"""The built-in tools: `current_time`, `calculate` and `propose_action`."""

from __future__ import annotations

from datetime import UTC, datetime

from cortex_workers.tools.calculator import evaluate
from cortex_workers.tools.registry import Tool, ToolRegistry
from cortex_workers.tools.results import ProposalRequest, ToolInputError

from ..messages import JsonObject

CURRENT_TIME_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

CALCULATE_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["expression"],
    "additionalProperties": False,
}


def current_time() -> str:
    """The current UTC time in ISO 8601, e.g. ``2026-11-22T18:00:00.123456+00:00``."""
    return datetime.now(UTC).isoformat()


def calculate(expression: str) -> dict[str, int | float]:
    """Evaluate an arithmetic expression; a bad one is an input error the model can fix."""
    try:
        return {"result": evaluate(expression)}
    except ValueError as exc:
        raise ToolInputError(str(exc)) from None


PROPOSE_ACTION_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "Short verb form, e.g. 'restart', 'reload-tls', 'rollback-deploy'",
        },
        "product": {"type": "string", "minLength": 1, "maxLength": 200},
        "params": {"type": "object", "description": "Action-specific parameters"},
        "rationale": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4000,
            "description": "Why this action is appropriate",
        },
        "blast_radius": {
            "type": "string",
            "maxLength": 200,
            "description": "Estimated scope, e.g. 'one host', 'one service'",
        },
        "reversible": {"type": "boolean", "description": "Can the action be undone?"},
    },
    "required": ["action", "product", "rationale"],
    "additionalProperties": False,
}


def propose_action(
    action: str,
    product: str,
    rationale: str,
    params: JsonObject | None = None,
    blast_radius: str | None = None,
    reversible: bool | None = None,
) -> ProposalRequest:
    """Nothing is executed: the proposal waits for an operator's confirm or reject."""
    return ProposalRequest(
        action=action,
        product=product,
        rationale=rationale,
        params=params or {},
        blast_radius=blast_radius,
        reversible=reversible,
    )


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
    registry.register(
        Tool(
            name="propose_action",
            description=(
                "Propose a remediation action for the operator to review. The operator must "
                "confirm it before anything is executed. This tool NEVER takes action by itself."
            ),
            parameters=PROPOSE_ACTION_PARAMETERS,
            fn=propose_action,
            read_only=False,
            timeout_s=5.0,
            max_timeout_s=30.0,
        )
    )
