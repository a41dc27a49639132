"""Turn status and cancellation."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from ...dispatch import publish
from ...runtime import Runtime
from ...store.db import transaction
from ...turns.submit import cancel_turn
from ..deps import Caller, CallerDep, RuntimeDep
from ..schemas import TurnOut
from ..views import require_turn, turn_out

router = APIRouter(prefix="/v1/turns", tags=["turns"])


@router.get("/{turn_id}", response_model=TurnOut)
def get_turn(turn_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> TurnOut:
    """Status, steps, tool calls, usage, cost, answer and error of a turn."""
    with transaction(rt.db) as db:
        turn = require_turn(db, turn_id, caller.tenant_id)
        caller.require_read(turn.session_id, f"turn {turn_id}")
        return turn_out(db, turn)


def _require_chat(rt: Runtime, caller: Caller, turn_id: uuid.UUID) -> None:
    with transaction(rt.db) as db:
        turn = require_turn(db, turn_id, caller.tenant_id)
    caller.require_chat(turn.session_id, f"turn {turn_id}")


@router.post(
    "/{turn_id}/cancel",
    response_model=TurnOut,
    responses={
        403: {"description": "a session token of scope `read`"},
        409: {"description": "the turn has already ended"},
    },
)
def cancel(turn_id: uuid.UUID, rt: RuntimeDep, caller: CallerDep) -> TurnOut:
    """Cancel a queued or running turn; its stream ends with `done` (status `cancelled`)."""
    _require_chat(rt, caller, turn_id)
    tenant_id = caller.tenant_id
    turn, next_steps = cancel_turn(rt, tenant_id=tenant_id, turn_id=turn_id)
    publish(next_steps)
    with transaction(rt.db) as db:
        return turn_out(db, require_turn(db, turn.id, tenant_id))
