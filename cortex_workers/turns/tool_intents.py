"""Exactly-once side effects of tool calls (docs/mcp.md, "Exactly once").

Before a tool with effects outside our database runs, the attempt is recorded (one
autocommitted statement). A later attempt of the same call that finds the record knows the
call may have happened: it sends it again, with the same idempotency key, only when the tool
declares itself idempotent by key; otherwise the call ends with an "outcome unknown" result.
A read-only or built-in tool costs nothing here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..runtime import Runtime
from ..store.db import autocommit_connection
from ..store.intents import record_intent
from ..tools.idempotency import idempotency_key
from ..tools.router import ToolOutcome, outcome_unknown


@dataclass(frozen=True, slots=True)
class Intent:
    """What a tool step knows before it sends its call."""

    key: str
    """The call's idempotency key."""
    refused: ToolOutcome | None = None
    """An "outcome unknown" result instead of a second send."""


def before_call(
    rt: Runtime,
    *,
    tool_call_id: uuid.UUID,
    turn_id: uuid.UUID,
    model_step_no: int,
    call_id: str,
    name: str,
    attempt: int,
) -> Intent:
    """The call's key, after recording the intent when its tool has effects."""
    key = idempotency_key(turn_id, model_step_no, call_id)
    tool = rt.tools.get(name)
    if tool is None or not tool.has_effects:
        return Intent(key)
    with autocommit_connection(rt.engine) as db:  # one statement, committed before the effect
        sends = record_intent(db, tool_call_id, idempotency_key=key, attempt=attempt)
    if sends > 1 and not tool.idempotent:
        return Intent(key, outcome_unknown(name))
    return Intent(key)
